package deletion

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/lifecycled/lifecycled/daemon/internal/derrors"
)

// MaxTenantIDLength bounds tenant ids whatever the configured format.
const MaxTenantIDLength = 255

// FormatUUID is the default tenant_id_format.
const FormatUUID = "uuid"

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// CanonicalTenantID checks id against tenant_id_format ("uuid", "" meaning
// the same, or an anchored regular expression) and returns the one spelling
// of it that jobs, reports and plugins use. A UUID is accepted in any letter
// case and returned in lower case: a store that compares strings (Redis keys,
// a DynamoDB string key) would otherwise see two tenants where the operator
// meant one, and a verification count in the other spelling would find
// nothing and call the job verified. With a regular expression the id is
// returned as given: the daemon cannot know which spellings the operator's
// applications consider equal, so the expression must admit only one.
// Errors wrap derrors.ErrInvalid, except an invalid expression (a config
// error, which validation normally catches first).
func CanonicalTenantID(id, format string) (string, error) {
	if p := textProblem(id, MaxTenantIDLength); p != "" {
		return "", fmt.Errorf("%w: tenant id %s", derrors.ErrInvalid, p)
	}
	if format == "" || format == FormatUUID {
		if !uuidRE.MatchString(id) {
			return "", fmt.Errorf("%w: tenant id %q is not a UUID (daemon.tenant_id_format = \"uuid\")", derrors.ErrInvalid, id)
		}
		// The expression admits ASCII only, so ToLower touches nothing else.
		return strings.ToLower(id), nil
	}
	re, err := regexp.Compile(format)
	if err != nil {
		return "", fmt.Errorf("tenant_id_format: %w", err)
	}
	if !re.MatchString(id) {
		return "", fmt.Errorf("%w: tenant id %q does not match daemon.tenant_id_format %s", derrors.ErrInvalid, id, format)
	}
	return id, nil
}

// textProblem says what is wrong with s as a tenant id or a hold's reason,
// which are stored, logged and shown as they are: empty, longer than max
// bytes, not UTF-8, or with a control character ("" when nothing is).
func textProblem(s string, max int) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > max:
		return fmt.Sprintf("is %d bytes long (at most %d)", len(s), max)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "contains a control character"
	}
	return ""
}
