// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// pluginPlatforms are the platforms kubectl-caliban is released for, as
// the krew manifest lists them.
var pluginPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// pluginArchive is the archive name of kubectl-caliban for a platform, as
// the krew manifest's uris name it.
func pluginArchive(platform string) string {
	return "kubectl-caliban_" + strings.ReplaceAll(platform, "/", "_") + ".tar.gz"
}

// archivePlugin writes a .tar.gz holding binary as kubectl-caliban at its
// top level, every time set to mtime and gzip's header empty, so that the
// same binary makes the same archive.
func archivePlugin(binary, out string, mtime time.Time) error {
	data, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	tarred, err := tarFiles([]tarFile{{name: "kubectl-caliban", data: data, mode: 0o555}}, mtime)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(tarred); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// sha256File is the hex SHA-256 of a file.
func sha256File(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// writeSums writes SHA256SUMS (the format of sha256sum, sorted by name)
// over every regular file in dir but itself.
func writeSums(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	sums := map[string]string{}
	var b strings.Builder
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "SHA256SUMS" {
			continue
		}
		sum, err := sha256File(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		sums[e.Name()] = sum
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return sums, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

// readSums parses SHA256SUMS.
func readSums(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("%s: bad line %q", path, sc.Text())
		}
		sums[name] = sum
	}
	return sums, sc.Err()
}

var (
	krewURI    = regexp.MustCompile(`^\s*uri: \S+/(kubectl-caliban_[a-z0-9]+_[a-z0-9]+\.tar\.gz)\s*$`)
	krewSHA    = regexp.MustCompile(`^(\s*sha256: )"0{64}"\s*$`)
	krewTagRef = "{{ .TagName }}"
)

// fillKrew fills the krew manifest template (plugins/krew/caliban.yaml):
// the tag, and each platform's sha256 from its archive's sum. Every
// placeholder must be filled: a template the release cannot read fails it.
func fillKrew(template []byte, version string, sums map[string]string) ([]byte, error) {
	if !bytes.Contains(template, []byte(krewTagRef)) {
		return nil, fmt.Errorf("krew template: no %s to fill", krewTagRef)
	}
	lines := strings.Split(strings.ReplaceAll(string(template), krewTagRef, strings.TrimPrefix(version, "v")), "\n")
	var out []string
	archive := ""
	filled := 0
	for _, line := range lines {
		if strings.Contains(line, "Placeholder") {
			continue
		}
		if m := krewURI.FindStringSubmatch(line); m != nil {
			archive = m[1]
		}
		if m := krewSHA.FindStringSubmatch(line); m != nil {
			sum, ok := sums[archive]
			if archive == "" || !ok {
				return nil, fmt.Errorf("krew template: no archive %q among the release's files for a sha256 placeholder", archive)
			}
			line = fmt.Sprintf("%s%q", m[1], sum)
			filled++
			archive = ""
		}
		out = append(out, line)
	}
	if filled != len(pluginPlatforms) {
		return nil, fmt.Errorf("krew template: filled %d sha256s, want one per platform (%d)", filled, len(pluginPlatforms))
	}
	return []byte(strings.Join(out, "\n")), nil
}

// releaseNotes is the CHANGELOG.md section of version ("## [x.y.z]", with
// or without the v), or the Unreleased one when the version has none yet
// (a test release), without its heading.
func releaseNotes(changelog []byte, version string) (string, error) {
	sections := map[string]string{}
	var order []string
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			sections[name] = strings.TrimSpace(body.String())
			order = append(order, name)
		}
		body.Reset()
	}
	for _, line := range strings.Split(string(changelog), "\n") {
		if strings.HasPrefix(line, "## [") {
			flush()
			name, _, _ = strings.Cut(strings.TrimPrefix(line, "## ["), "]")
			continue
		}
		if name != "" {
			body.WriteString(line + "\n")
		}
	}
	flush()
	for _, want := range []string{strings.TrimPrefix(version, "v"), version, "Unreleased"} {
		if s, ok := sections[want]; ok && s != "" {
			return fmt.Sprintf("# caliban-operator %s\n\n%s\n", version, s), nil
		}
	}
	return "", fmt.Errorf("CHANGELOG.md has no section for %s and no Unreleased one (sections: %s)", version, strings.Join(order, ", "))
}

// sortedPlatforms is the keys of a platform map, sorted.
func sortedPlatforms[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// normalizeTgz rewrites a .tar.gz with every time set to mtime and no
// name or time in its gzip header, keeping its entries and their order:
// helm package stamps the time of packaging, and one commit should give
// one chart.
func normalizeTgz(path string, mtime time.Time) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		_ = f.Close()
		return err
	}
	tr := tar.NewReader(zr)
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		_ = f.Close()
		return err
	}
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		h.ModTime, h.AccessTime, h.ChangeTime = mtime.UTC().Truncate(time.Second), time.Time{}, time.Time{}
		h.Uname, h.Gname, h.Uid, h.Gid = "", "", 0, 0
		if err := tw.WriteHeader(h); err != nil {
			_ = f.Close()
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			_ = f.Close()
			return err
		}
	}
	_ = f.Close()
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
