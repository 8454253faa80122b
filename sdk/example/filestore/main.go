// Command filestore is the example lifecycled plugin: a TenantDeleter for a
// directory tree that keeps each tenant's files under <root>/t-<tenant>/.
// It is the starting point of docs/plugin-authoring.md and passes the
// conformance kit (main_test.go).
//
//	[[deleter]]
//	name = "files:uploads"
//	path = "/usr/lib/lifecycled/plugins/lifecycled-plugin-filestore"
//	[deleter.config]
//	root = "/srv/uploads"
package main

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/lifecycled/lifecycled/sdk"
)

func main() { sdk.ServeTenantDeleter(&deleter{}) }

type deleter struct {
	root   string
	format string // the daemon's tenant_id_format
}

// Configure checks the config and that the root is a readable directory.
func (d *deleter) Configure(_ context.Context, req *sdk.ConfigureRequest) (*sdk.ConfigureResponse, error) {
	if err := sdk.ValidateTenantIDFormat(req.TenantIDFormat); err != nil {
		return nil, err
	}
	root, _ := req.Config["root"].(string)
	if root == "" || !filepath.IsAbs(root) {
		return nil, sdk.InvalidConfig(sdk.FieldError{Field: "root", Problem: "must be an absolute directory path"})
	}
	for k := range req.Config {
		if k != "root" {
			return nil, sdk.InvalidConfig(sdk.FieldError{Field: k, Problem: "unknown key"})
		}
	}
	d.root, d.format = root, req.TenantIDFormat
	if err := d.rootPresent(); err != nil {
		return nil, err
	}
	return &sdk.ConfigureResponse{PluginVersion: "0.1.0"}, nil
}

// rootPresent checks that the root is there: a volume that is not mounted
// (yet) must be an error, never a tenant without files.
func (d *deleter) rootPresent() error {
	if fi, err := os.Stat(d.root); err != nil || !fi.IsDir() {
		return sdk.Unavailable(errors.New("root " + d.root + " is not a directory (not mounted?)"))
	}
	return nil
}

// tenantDir treats the tenant id as data: it is escaped into one path
// element, so "..", "/" or "*" can never name another directory.
func (d *deleter) tenantDir(tenant string) string {
	return filepath.Join(d.root, "t-"+url.PathEscape(tenant))
}

// files lists a tenant's regular files.
func (d *deleter) files(tenant string) ([]string, error) {
	if err := d.rootPresent(); err != nil {
		return nil, err
	}
	var out []string
	err := filepath.WalkDir(d.tenantDir(tenant), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return filepath.SkipAll
			}
			return err
		}
		if !e.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// Count returns the number of the tenant's files.
func (d *deleter) Count(_ context.Context, req *sdk.CountRequest) (*sdk.CountResponse, error) {
	// The daemon checked the id already; a plugin checks again anyway.
	if err := sdk.CheckTenantID(d.format, req.TenantID); err != nil {
		return nil, err
	}
	files, err := d.files(req.TenantID)
	if err != nil {
		return nil, sdk.Retryable(err, 0)
	}
	return &sdk.CountResponse{Count: int64(len(files))}, nil
}

// Delete removes the tenant's files in batches, reporting progress after
// each, stopping promptly on cancellation, then removes the directories.
func (d *deleter) Delete(ctx context.Context, req *sdk.DeleteRequest, progress sdk.Progress) (*sdk.DeleteResponse, error) {
	if err := sdk.CheckTenantID(d.format, req.TenantID); err != nil {
		return nil, err
	}
	files, err := d.files(req.TenantID)
	if err != nil {
		return nil, sdk.PartialDeletion(0, sdk.Retryable(err, 0))
	}
	var deleted int64
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, sdk.PartialDeletion(deleted, err)
		}
		if err := os.Remove(f); err != nil {
			if !os.IsNotExist(err) {
				return nil, sdk.PartialDeletion(deleted, sdk.Retryable(err, 0))
			}
			// Gone already (another Delete took it), unless the whole
			// root went away.
			if err := d.rootPresent(); err != nil {
				return nil, sdk.PartialDeletion(deleted, err)
			}
			continue
		}
		deleted++
		if i%100 == 99 || i == len(files)-1 {
			progress(deleted)
		}
	}
	if err := os.RemoveAll(d.tenantDir(req.TenantID)); err != nil {
		return nil, sdk.PartialDeletion(deleted, sdk.Retryable(err, 0))
	}
	return &sdk.DeleteResponse{DeletedCount: deleted}, nil
}
