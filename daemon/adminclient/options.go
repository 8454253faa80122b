package adminclient

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
)

// idempotencyHeader is the API's Idempotency-Key header.
const idempotencyHeader = "Idempotency-Key"

// Option changes one call.
type Option func(*options)

type options struct {
	header         http.Header
	query          url.Values
	body           []byte
	raw            *[]byte
	status         *int
	respHeader     *http.Header
	oncePerRoute   string
	idempotencyKey string
	decodeFailure  bool
}

// Header sets a request header.
func Header(name, value string) Option {
	return func(o *options) {
		if o.header == nil {
			o.header = http.Header{}
		}
		o.header.Set(name, value)
	}
}

// IdempotencyKey makes a POST replay-safe: the same key gets the first
// answer again instead of a second change. Other methods are sent without
// it: the API keys POSTs only.
func IdempotencyKey(key string) Option { return func(o *options) { o.idempotencyKey = key } }

// OncePerRoute derives the Idempotency-Key from key and the route's path,
// so that one form that makes two calls makes two keys, and the same form
// sent twice changes things once (the console's forms). "" sets no key.
func OncePerRoute(key string) Option { return func(o *options) { o.oncePerRoute = key } }

func onceKey(key, path string) string {
	sum := sha256.Sum256([]byte(path))
	return "console-" + key + "-" + hex.EncodeToString(sum[:8])
}

// Raw receives the answer's body as it came, 2xx or not: the CLI prints it
// for --format json, and tests compare it byte for byte.
func Raw(dst *[]byte) Option { return func(o *options) { o.raw = dst } }

// Status receives the answer's HTTP status.
func Status(dst *int) Option { return func(o *options) { o.status = dst } }

// ResponseHeader receives the answer's headers.
func ResponseHeader(dst *http.Header) Option { return func(o *options) { o.respHeader = dst } }

// Query adds query parameters to the route's own (tests of what the server
// refuses: an unknown parameter, a malformed value).
func Query(q url.Values) Option { return func(o *options) { o.query = q } }

// Body sends b as the request body instead of the typed one (tests of
// what the server refuses: a misspelt field, a body that is not JSON).
func Body(b []byte) Option { return func(o *options) { o.body = b } }
