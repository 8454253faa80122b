package ledger_test

import (
	"bytes"
	"encoding/json"
	"errors"
)

var errNoKey = errors.New("no such receipt key is registered")

func jsonIndent(buf *bytes.Buffer, data []byte) error { return json.Indent(buf, data, "", "  ") }
