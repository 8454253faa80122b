package adminclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/lifecycled/lifecycled/daemon/wire"
)

// Topics is GET /api/v1/dlq: each dead-letter topic with its counts.
func (c *Client) Topics(ctx context.Context, opts ...Option) (wire.Topics, error) {
	var out wire.Topics
	return out, c.send(ctx, call{method: http.MethodGet, path: pathDLQ, out: &out}, opts)
}

// ListMessages is GET /api/v1/dlq/{topic} (query: status, page, page_size).
func (c *Client) ListMessages(ctx context.Context, topic string, query url.Values, opts ...Option) (wire.MessageList, error) {
	var out wire.MessageList
	return out, c.send(ctx, call{method: http.MethodGet, path: topicListPath(topic), query: query, out: &out}, opts)
}

// Message is GET /api/v1/dlq/messages/{id}.
func (c *Client) Message(ctx context.Context, id string, opts ...Option) (wire.Message, error) {
	var out wire.Message
	return out, c.send(ctx, call{method: http.MethodGet, path: messagePath(id, ""), out: &out}, opts)
}

// DeleteMessage is DELETE /api/v1/dlq/messages/{id}.
func (c *Client) DeleteMessage(ctx context.Context, id string, opts ...Option) (wire.Deleted, error) {
	var out wire.Deleted
	return out, c.send(ctx, call{method: http.MethodDelete, path: messagePath(id, ""), out: &out}, opts)
}

// RetryMessage is POST /api/v1/dlq/messages/{id}/retry.
func (c *Client) RetryMessage(ctx context.Context, id string, opts ...Option) (wire.MessageChange, error) {
	var out wire.MessageChange
	return out, c.send(ctx, call{method: http.MethodPost, path: messagePath(id, "/retry"), out: &out}, opts)
}

// ReviveMessage is POST /api/v1/dlq/messages/{id}/revive.
func (c *Client) ReviveMessage(ctx context.Context, id string, opts ...Option) (wire.MessageChange, error) {
	var out wire.MessageChange
	return out, c.send(ctx, call{method: http.MethodPost, path: messagePath(id, "/revive"), out: &out}, opts)
}

// Replay is POST /api/v1/dlq/messages/{id}/replay: the message sent as
// edited (nil: unchanged), or with dryRun what would be sent.
func (c *Client) Replay(ctx context.Context, id string, req *wire.ReplayRequest, dryRun bool, opts ...Option) (wire.ReplayResult, error) {
	var out wire.ReplayResult
	k := call{method: http.MethodPost, path: messagePath(id, "/replay"), query: dryRunQuery(dryRun), out: &out}
	if req != nil {
		k.body = req
	}
	return out, c.send(ctx, k, opts)
}

// History is GET /api/v1/dlq/messages/{id}/history.
func (c *Client) History(ctx context.Context, id string, opts ...Option) (wire.History, error) {
	var out wire.History
	return out, c.send(ctx, call{method: http.MethodGet, path: messagePath(id, "/history"), out: &out}, opts)
}

// RetryAll is POST /api/v1/dlq/{topic}/retry-all, or with dryRun how many
// a real call would republish.
func (c *Client) RetryAll(ctx context.Context, topic string, dryRun bool, opts ...Option) (wire.RetryAllResult, error) {
	var out wire.RetryAllResult
	return out, c.send(ctx, call{method: http.MethodPost, path: topicPath(topic, "/retry-all"), query: dryRunQuery(dryRun), out: &out}, opts)
}

// Pause is POST /api/v1/dlq/{topic}/pause (reason "" for the default).
func (c *Client) Pause(ctx context.Context, topic, reason string, opts ...Option) (wire.PauseResult, error) {
	var out wire.PauseResult
	k := call{method: http.MethodPost, path: topicPath(topic, "/pause"), out: &out}
	if reason != "" {
		k.body = wire.PauseRequest{Reason: reason}
	}
	return out, c.send(ctx, k, opts)
}

// Resume is POST /api/v1/dlq/{topic}/resume.
func (c *Client) Resume(ctx context.Context, topic string, opts ...Option) (wire.PauseResult, error) {
	var out wire.PauseResult
	return out, c.send(ctx, call{method: http.MethodPost, path: topicPath(topic, "/resume"), out: &out}, opts)
}

// Search is GET /api/v1/dlq/messages (query: the search filters of
// docs/reference.md, checked by the server).
func (c *Client) Search(ctx context.Context, query url.Values, opts ...Option) (wire.SearchResult, error) {
	var out wire.SearchResult
	return out, c.send(ctx, call{method: http.MethodGet, path: pathSearch, query: query, out: &out}, opts)
}

// Groups is GET /api/v1/dlq/groups.
func (c *Client) Groups(ctx context.Context, query url.Values, opts ...Option) (wire.Groups, error) {
	var out wire.Groups
	return out, c.send(ctx, call{method: http.MethodGet, path: pathGroups, query: query, out: &out}, opts)
}
