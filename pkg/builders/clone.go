// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"net/url"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// SourceCredentialsDir is where the clone init container finds each
// private source's Secret: in a directory named by the source's index, so
// that no value from the Workspace becomes part of a path.
const SourceCredentialsDir = "/var/run/caliban/source-credentials"

// SSHKnownHostsKey is the key of an ssh-auth Secret holding the host keys
// the clone trusts; host-key checking is never turned off.
const SSHKnownHostsKey = "known_hosts"

// sourceAuth is how a repository URL authenticates, read from its scheme.
type sourceAuth int

const (
	authUnsupported sourceAuth = iota // no credentials can be given (file://, http://, ...)
	authBasic                         // https://: kubernetes.io/basic-auth
	authSSH                           // ssh:// or git@host:path: kubernetes.io/ssh-auth
)

// repoAuth reads the scheme as git does, case and all: git looks for a
// remote helper named after the scheme as written, so HTTPS:// is not
// https:// to it either.
func repoAuth(repo string) sourceAuth {
	switch {
	case strings.HasPrefix(repo, "https://"):
		return authBasic
	case strings.HasPrefix(repo, "ssh://"), strings.HasPrefix(repo, "git@"):
		return authSSH
	}
	return authUnsupported
}

// secretType and secretKeys are what a source's Secret must be and hold.
func (a sourceAuth) secretType() corev1.SecretType {
	if a == authSSH {
		return corev1.SecretTypeSSHAuth
	}
	return corev1.SecretTypeBasicAuth
}

// schemes names the repos of an auth, for messages: "an https://" or "an
// ssh:// or git@".
func (a sourceAuth) schemes() string {
	if a == authSSH {
		return "an ssh:// or git@"
	}
	return "an https://"
}

func (a sourceAuth) secretKeys() []string {
	if a == authSSH {
		return []string{corev1.SSHAuthPrivateKey, SSHKnownHostsKey}
	}
	return []string{corev1.BasicAuthUsernameKey, corev1.BasicAuthPasswordKey}
}

// credentialsAuth is how a source authenticates with its Secret, or
// authUnsupported when it has none (validation refuses a credentialsRef on
// a repo that cannot take one).
func credentialsAuth(s calibanv1alpha1.Source) sourceAuth {
	if s.CredentialsRef == nil {
		return authUnsupported
	}
	return repoAuth(s.Repo)
}

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
//
// A source with credentials finds its Secret's files under
// credentialsDir/<index>; only the git commands that talk to the remote
// are given them (see remoteGit).
func CloneScript(sources []calibanv1alpha1.Source, credentialsDir string) string {
	var b strings.Builder
	b.WriteString("set -eu\n")
	for i, s := range sources {
		ref := s.Ref
		if ref == "" {
			ref = "main"
		}
		remote := remoteGit(s, path.Join(credentialsDir, strconv.Itoa(i)))
		dotGit := shellQuote(strings.TrimRight(s.Path, "/") + "/.git")
		dir := shellQuote(s.Path)
		b.WriteString("if [ ! -e " + dotGit + " ]; then ")
		if IsCommitSHA(ref) {
			sha := shellQuote(strings.ToLower(ref))
			b.WriteString("{ git init -q -- " + dir + " && git -C " + dir + " remote add origin -- " + shellQuote(s.Repo) +
				" && " + remote + " -C " + dir + " fetch -q --depth 1 origin " + sha + " && git -C " + dir + " checkout -q --detach " + sha +
				"; } || { rm -rf -- " + dotGit + "; exit 1; }")
		} else {
			b.WriteString(remote + " clone --depth 1 --branch " + shellQuote(ref) + " -- " + shellQuote(s.Repo) + " " + dir)
		}
		b.WriteString("; fi\n")
	}
	return b.String()
}

// remoteGit is the command, up to the subcommand, that runs git against a
// source's remote. With credentials it points git at the Secret's files by
// path, so no secret value is ever in an argument or an environment value:
//
//   - https: a credential helper (any helper configured in the image is
//     reset first) that reads username and password from the files (cat
//     gets only the paths; the values pass through the shell's printf
//     builtin), and answers only for https to the repo's own host[:port],
//     so a redirect to another host, or to plain http on the same one, is
//     not handed the password. Prompts and askpass programs are off: wrong
//     credentials fail with git's message instead of asking anything else
//     (GIT_ASKPASS set but empty also hides core.askPass and SSH_ASKPASS).
//   - ssh: GIT_SSH_COMMAND with the key, only the known_hosts file from the
//     Secret, StrictHostKeyChecking=yes, no agent, no user config and no
//     prompt.
func remoteGit(s calibanv1alpha1.Source, dir string) string {
	file := func(key string) string { return shellQuote(path.Join(dir, key)) }
	switch credentialsAuth(s) {
	case authBasic:
		helper := `!f() { test "$1" = get || exit 0; p=; h=; while IFS= read -r l; do case "$l" in protocol=*) p=${l#protocol=};; host=*) h=${l#host=};; esac; done; ` +
			`test "$p" = https && test -n "$h" && test "$h" = ` + shellQuote(repoHost(s.Repo)) + ` || exit 0; ` +
			`printf 'username=%s\npassword=%s\n' "$(cat ` + file(corev1.BasicAuthUsernameKey) + `)" "$(cat ` + file(corev1.BasicAuthPasswordKey) + `)"; }; f`
		return "GIT_TERMINAL_PROMPT=0 GIT_ASKPASS= git -c credential.helper= -c " + shellQuote("credential.helper="+helper)
	case authSSH:
		ssh := "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none -i " + file(corev1.SSHAuthPrivateKey) +
			" -o StrictHostKeyChecking=yes -o UserKnownHostsFile=" + file(SSHKnownHostsKey) + " -o GlobalKnownHostsFile=/dev/null -o UpdateHostKeys=no"
		return "GIT_SSH_COMMAND=" + shellQuote(ssh) + " git"
	}
	return "git"
}

// repoHost is the host[:port] git names in a credential request for an
// https repo, or "" when net/url cannot read one; validation refuses
// credentials on such a repo, and the helper never answers for an empty
// host.
func repoHost(repo string) string {
	u, err := url.Parse(repo)
	if err != nil {
		return ""
	}
	return u.Host
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
