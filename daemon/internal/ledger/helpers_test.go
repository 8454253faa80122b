package ledger_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/lifecycled/lifecycled/daemon/internal/retry"
)

var errNoKey = errors.New("no such receipt key is registered")

func jsonIndent(buf *bytes.Buffer, data []byte) error { return json.Indent(buf, data, "", "  ") }

// retryNow retries a PARTIAL job at once.
var retryNow = retry.Policy{Initial: 10 * time.Millisecond, Multiplier: 1, Max: 10 * time.Millisecond, Jitter: retry.JitterNone}
