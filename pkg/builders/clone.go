package builders

import (
	"strings"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// CloneScript is the clone-workspace init container's /bin/sh script. For
// each source, in order, it checks out repo at ref into path unless
// path/.git already exists: the workspace volume outlives pod restarts, and
// a second clone into a non-empty directory would fail the pod. A branch or
// tag is a shallow `git clone --branch`; a full commit SHA, which --branch
// does not take, is fetched by id into a fresh repository, whose .git is
// removed again if any step fails so that the next start tries afresh
// rather than skip a half-made checkout. Every value is a single POSIX
// single-quoted word, so nothing in a source can be read by the shell as
// syntax; "--" ends git's options so a value starting with '-' cannot
// become one (a SHA is hex digits only, and a path is absolute).
func CloneScript(sources []calibanv1alpha1.Source) string {
	var b strings.Builder
	b.WriteString("set -eu\n")
	for _, s := range sources {
		ref := s.Ref
		if ref == "" {
			ref = "main"
		}
		dotGit := shellQuote(strings.TrimRight(s.Path, "/") + "/.git")
		dir := shellQuote(s.Path)
		b.WriteString("if [ ! -e " + dotGit + " ]; then ")
		if IsCommitSHA(ref) {
			sha := shellQuote(strings.ToLower(ref))
			b.WriteString("{ git init -q -- " + dir + " && git -C " + dir + " remote add origin -- " + shellQuote(s.Repo) +
				" && git -C " + dir + " fetch -q --depth 1 origin " + sha + " && git -C " + dir + " checkout -q --detach " + sha +
				"; } || { rm -rf -- " + dotGit + "; exit 1; }")
		} else {
			b.WriteString("git clone --depth 1 --branch " + shellQuote(ref) + " -- " + shellQuote(s.Repo) + " " + dir)
		}
		b.WriteString("; fi\n")
	}
	return b.String()
}

// IsCommitSHA reports whether ref is a full commit id: 40 (SHA-1) or 64
// (SHA-256) hexadecimal digits.
func IsCommitSHA(ref string) bool {
	return (len(ref) == 40 || len(ref) == 64) && isHex(ref)
}

// looksAbbreviated reports whether ref reads as an abbreviated commit id:
// 7 or more hex digits, not a full id, with both a digit and a letter.
// git cannot fetch an abbreviation, and --branch would look for a branch of
// that name; all-digit names (dated tags such as 20240101) and all-letter
// ones (a branch called "facade") stay branch or tag names.
func looksAbbreviated(ref string) bool {
	if len(ref) < 7 || IsCommitSHA(ref) || !isHex(ref) {
		return false
	}
	return strings.ContainsAny(ref, "0123456789") && strings.ContainsAny(strings.ToLower(ref), "abcdef")
}

func isHex(s string) bool {
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F') {
			return false
		}
	}
	return s != ""
}

// shellQuote makes s one single-quoted shell word: inside single quotes
// nothing is special except the quote itself, which is written as: close
// the quoted word, an escaped quote, reopen.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
