// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	sandboxSuffix        = "-sbx"
	serviceAccountSuffix = "-sa"
	networkPolicySuffix  = "-netpol"

	// nameHashLen hex characters of sha256 tell two long names with the
	// same prefix apart.
	nameHashLen = 10
	// safeNameMax is the limit of a DNS-1035 label and of a label value.
	safeNameMax = 63
	// emptyPrefix stands in when sanitizing leaves nothing usable.
	emptyPrefix = "t"
)

// SandboxName is the name of a task's Sandbox, and so of its headless
// Service, which must be a DNS-1035 label. The rule below decides the names
// of objects that already exist in clusters: it must never change.
//
// The plain form "<task>-sbx" is used whenever it is a valid DNS-1035 label
// (at most 63 characters, lowercase letters, digits and '-', starting with a
// letter, ending with a letter or digit). Otherwise the safe form is
//
//	<prefix>-<h>-sbx
//
// where h is the first 10 lowercase hex characters of the SHA-256 of the
// full task name, and prefix is the task name
//
//  1. lowercased (ASCII A-Z only), with every character other than a-z,
//     0-9 and '-' replaced by '-' (for a valid task name, a DNS-1123
//     subdomain, that replaces only '.');
//  2. with every run of '-' collapsed to one '-';
//  3. with leading characters dropped until it starts with a letter, and
//     "t" if nothing is left;
//  4. cut to its first 63 - 1 - 10 - len(suffix) characters (48 for
//     "-sbx", 49 for "-sa", 45 for "-netpol"), then stripped of trailing
//     '-', so the whole name is at most 63 characters.
//
// ServiceAccountName and NetworkPolicyName follow the same rule with the
// suffixes "-sa" and "-netpol". The result is always a valid DNS-1035 label
// of at most 63 characters, whatever the input.
//
// Two distinct task names get the same safe name only if their hashes
// collide in 40 bits and their prefixes agree. A safe name can equal another
// task's plain name only if that task is deliberately named "<prefix>-<h>".
// Callers record the name they used (status.sandboxRef.name) rather than
// asking clients to recompute it.
func SandboxName(task string) string { return safeName(task, sandboxSuffix) }

// ServiceAccountName is the name of a task's ServiceAccount: "<task>-sa"
// when that is a valid DNS-1035 label, else the safe form described on
// SandboxName.
func ServiceAccountName(task string) string { return safeName(task, serviceAccountSuffix) }

// NetworkPolicyName is the name of a task's NetworkPolicy: "<task>-netpol"
// when that is a valid DNS-1035 label, else the safe form described on
// SandboxName.
func NetworkPolicyName(task string) string { return safeName(task, networkPolicySuffix) }

// TaskLabelValue is the value of the task label on a task's children and
// pod. It is the task name itself when that is a valid label value (at most
// 63 characters; every task name up to 63 characters is one). Otherwise it
// is "<prefix>-<h>" by SandboxName's rule with an empty suffix (so the
// prefix is cut to 52 characters) and one difference in step 3: a label
// value may start with a digit, so only leading '-' are dropped and digits
// are kept ("1abc..." stays "1abc...").
// The result is always a valid label value of at most 63 characters.
func TaskLabelValue(task string) string {
	if len(content.IsLabelValue(task)) == 0 {
		return task
	}
	return hashedName(task, "", false)
}

func safeName(task, suffix string) string {
	if plain := task + suffix; len(validation.IsDNS1035Label(plain)) == 0 {
		return plain
	}
	return hashedName(task, suffix, true)
}

// hashedName is the safe form: sanitized prefix, '-', hash, suffix.
func hashedName(task, suffix string, startWithLetter bool) string {
	sum := sha256.Sum256([]byte(task))
	h := hex.EncodeToString(sum[:])[:nameHashLen]

	prefix := sanitizeName(task, startWithLetter)
	if max := safeNameMax - 1 - nameHashLen - len(suffix); len(prefix) > max {
		prefix = prefix[:max]
	}
	// The prefix starts with a letter or digit, so trimming never empties it.
	return strings.TrimRight(prefix, "-") + "-" + h + suffix
}

// sanitizeName applies steps 1-3 of SandboxName's rule byte by byte, so any
// input, including invalid UTF-8, yields ASCII.
func sanitizeName(task string, startWithLetter bool) string {
	out := make([]byte, 0, len(task))
	for i := 0; i < len(task); i++ {
		c := task[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		default:
			c = '-'
		}
		if c == '-' && len(out) > 0 && out[len(out)-1] == '-' {
			continue
		}
		out = append(out, c)
	}
	for len(out) > 0 {
		c := out[0]
		if (c >= 'a' && c <= 'z') || (!startWithLetter && c >= '0' && c <= '9') {
			break
		}
		out = out[1:]
	}
	if len(out) == 0 {
		return emptyPrefix
	}
	return string(out)
}
