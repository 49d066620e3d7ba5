// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPrintableEscapesEveryControlCharacter(t *testing.T) {
	tests := map[string]struct {
		in, line, text string
	}{
		"plain text is left as it is": {
			in: `workspace 'ws' not ready: secret 'key' not found; C:\path ünïcödé ✓`, line: `workspace 'ws' not ready: secret 'key' not found; C:\path ünïcödé ✓`,
			text: `workspace 'ws' not ready: secret 'key' not found; C:\path ünïcödé ✓`,
		},
		"an OSC 52 clipboard write is shown, not sent": {
			in: "a\x1b]52;c;ZXZpbA==\x07b", line: `a\x1b]52;c;ZXZpbA==\x07b`, text: `a\x1b]52;c;ZXZpbA==\x07b`,
		},
		"a screen clear is shown, not sent":           {in: "\x1b[2J\x1b[H", line: `\x1b[2J\x1b[H`, text: `\x1b[2J\x1b[H`},
		"a C1 CSI is shown as its code point":         {in: "\u009b2J\u0085\u0080", line: `\u009b2J\u0085\u0080`, text: `\u009b2J\u0085\u0080`},
		"DEL, NUL and backspace":                      {in: "\x7f\x00\x08", line: `\x7f\x00\x08`, text: `\x7f\x00\x08`},
		"a carriage return cannot overwrite the line": {in: "ok\rfake", line: `ok\rfake`, text: `ok\rfake`},
		"newlines and tabs are escaped on a line, kept in text": {
			in: "one\ntwo\tthree", line: `one\ntwo\tthree`, text: "one\ntwo\tthree",
		},
		"bytes that are not UTF-8 are shown as bytes": {in: "a\x9b2Jb\xff", line: `a\x9b2Jb\xff`, text: `a\x9b2Jb\xff`},
		"the empty string":                            {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.line, Printable(tc.in)); diff != "" {
				t.Errorf("Printable (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.text, PrintableText(tc.in)); diff != "" {
				t.Errorf("PrintableText (-want +got):\n%s", diff)
			}
		})
	}
}
