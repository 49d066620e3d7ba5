// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Printable is s as it may reach a terminal on one line: every control
// character is shown escaped instead of emitted. What the plugin prints
// from the cluster (status messages and reasons, Event notes, names) was
// written by whoever may write a status, an Event or a Workspace; emitted
// as it is, an escape sequence could set the reader's clipboard (OSC 52),
// clear or rewrite the screen, or a newline or carriage return forge a line
// of the output. Escaped are C0 (\n, \t and \r by their names, the others
// as \xNN), DEL (\x7f), C1 (U+0080 to U+009F, as \u00NN: a terminal may
// take U+009B for CSI) and bytes that are not UTF-8 (\xNN). Everything else,
// a backslash included, is left as it is: the text is for reading, not for
// parsing back.
func Printable(s string) string { return escape(s, false) }

// PrintableText is Printable for text of several lines, an error's: its
// newlines and tabs are kept.
func PrintableText(s string) string { return escape(s, true) }

func escape(s string, multiline bool) string {
	if !needsEscape(s, multiline) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case multiline && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether escape would change s: the common case, a
// message of plain text, is returned as it is.
func needsEscape(s string, multiline bool) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return true
		case multiline && (r == '\n' || r == '\t'):
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			return true
		}
		i += size
	}
	return false
}
