package sdk

import "github.com/lifecycled/lifecycled/sdk/internal/scrub"

// IsSecretKey reports whether a config key names a secret. Values of such
// keys are scrubbed from everything a plugin returns or logs.
func IsSecretKey(k string) bool { return scrub.IsSecretKey(k) }

// scrubError returns err with its message scrubbed (class and details kept)
// and without its cause, which stays in the plugin.
func scrubError(s *scrub.Scrubber, err error) error {
	if err == nil {
		return nil
	}
	e := asError(err)
	e.Message = s.Scrub(e.Message)
	for i := range e.Fields {
		e.Fields[i].Problem = s.Scrub(e.Fields[i].Problem)
	}
	e.cause = nil
	return e
}
