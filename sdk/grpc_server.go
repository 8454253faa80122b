package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/lifecycled/lifecycled/sdk/internal/scrub"
	pb "github.com/lifecycled/lifecycled/sdk/proto/lifecycled/plugin/v1"
)

// handlerBase is what the servers of both plugin kinds share: the
// plugin's logger and the scrubber its secrets were registered with.
type handlerBase struct {
	log   hclog.Logger
	scrub *scrub.Scrubber
}

// guard runs a handler with panic recovery and secret scrubbing, so that a
// bug in a plugin answers an Internal error instead of killing the process,
// and nothing that leaves the plugin holds a secret.
func (h *handlerBase) guard(method string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			h.log.Error("handler panicked", "method", method, "panic", h.scrub.Scrub(fmt.Sprint(p)), "stack", string(debug.Stack()))
			err = &Error{Class: ClassPermanent, Code: CodeInternal, Message: fmt.Sprintf("plugin panicked in %s: %s", method, h.scrub.Scrub(fmt.Sprint(p)))}
		}
		if err != nil {
			err = toStatus(scrubError(h.scrub, err))
		}
	}()
	return fn()
}

func (h *handlerBase) configureRequest(req *pb.ConfigureRequest) (*ConfigureRequest, error) {
	cfg := map[string]any{}
	if len(req.GetConfigJson()) > 0 {
		if err := json.Unmarshal(req.GetConfigJson(), &cfg); err != nil {
			return nil, InvalidConfig(FieldError{Field: "config", Problem: "not a JSON object: " + err.Error()})
		}
	}
	h.scrub.AddFromConfig(cfg)
	return &ConfigureRequest{Name: req.GetName(), Config: cfg, TenantIDFormat: req.GetTenantIdFormat()}, nil
}

// configure serves Configure for either plugin kind.
func (h *handlerBase) configure(ctx context.Context, req *pb.ConfigureRequest,
	impl func(context.Context, *ConfigureRequest) (*ConfigureResponse, error)) (*pb.ConfigureResponse, error) {
	var out *pb.ConfigureResponse
	err := h.guard("Configure", func() error {
		r, err := h.configureRequest(req)
		if err != nil {
			return err
		}
		resp, err := impl(ctx, r)
		if err != nil {
			return err
		}
		out = &pb.ConfigureResponse{PluginVersion: resp.PluginVersion, Warnings: resp.Warnings}
		if resp.Source != (SourceTraits{}) {
			out.Source = traitsToPB(resp.Source)
		}
		return nil
	})
	return out, err
}

// validUTF8 keeps proto3 string fields marshallable: an error that quotes a
// message's bytes must not fail the whole response.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
