// Package jcs writes JSON strings as RFC 8785 (the JSON Canonicalization
// Scheme) does, for the two canonical forms the daemon hashes or signs:
// the plan shape and the erasure receipt.
package jcs

import (
	"fmt"
	"io"
)

// Writer is where a canonical form is built (a strings.Builder, a
// bytes.Buffer).
type Writer interface {
	io.Writer
	io.ByteWriter
	io.StringWriter
	WriteRune(r rune) (int, error)
}

// WriteString writes s quoted: '"' and '\' escaped, control characters as
// \b \t \n \f \r or \u00xx, everything else as is. Each byte of s that is
// not UTF-8 is written as U+FFFD.
func WriteString(w Writer, s string) {
	w.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			w.WriteString(`\"`)
		case '\\':
			w.WriteString(`\\`)
		case '\b':
			w.WriteString(`\b`)
		case '\t':
			w.WriteString(`\t`)
		case '\n':
			w.WriteString(`\n`)
		case '\f':
			w.WriteString(`\f`)
		case '\r':
			w.WriteString(`\r`)
		default:
			if r < 0x20 {
				fmt.Fprintf(w, `\u%04x`, r)
			} else {
				w.WriteRune(r)
			}
		}
	}
	w.WriteByte('"')
}
