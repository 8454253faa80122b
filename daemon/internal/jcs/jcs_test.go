package jcs

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteStringEscapesAsRFC8785(t *testing.T) {
	var b strings.Builder
	WriteString(&b, "a\"b\\c\b\t\n\f\r\x01\x1f é €")
	require.Equal(t, `"a\"b\\c\b\t\n\f\r\u0001\u001f é €"`, b.String())
}

func TestWriteStringReplacesEachByteThatIsNotUTF8(t *testing.T) {
	var buf bytes.Buffer
	WriteString(&buf, "x\xff\xfey")
	require.Equal(t, "\"x\uFFFD\uFFFDy\"", buf.String())
}
