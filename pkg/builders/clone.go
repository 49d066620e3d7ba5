package builders

import (
	"strings"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// CloneScript is the clone-workspace init container's /bin/sh script. For
// each source, in order, it shallow-clones repo at ref into path unless
// path/.git already exists: the workspace volume outlives pod restarts, and
// a second clone into a non-empty directory would fail the pod. Every value
// is a single POSIX single-quoted word, so nothing in a source can be read
// by the shell as syntax; "--" ends git's options so a value starting with
// '-' cannot become one.
func CloneScript(sources []calibanv1alpha1.Source) string {
	var b strings.Builder
	b.WriteString("set -eu\n")
	for _, s := range sources {
		ref := s.Ref
		if ref == "" {
			ref = "main"
		}
		b.WriteString("if [ ! -e " + shellQuote(strings.TrimRight(s.Path, "/")+"/.git") + " ]; then git clone --depth 1 --branch " +
			shellQuote(ref) + " -- " + shellQuote(s.Repo) + " " + shellQuote(s.Path) + "; fi\n")
	}
	return b.String()
}

// shellQuote makes s one single-quoted shell word: inside single quotes
// nothing is special except the quote itself, which is written as: close
// the quoted word, an escaped quote, reopen.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
