// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v4/pkg/registry"
)

// push sends the release in dir to the registries its release.json names:
// the image index under <image>:<version>, then each chart as
// <registry>/charts/<chart>:<chart version>. It reads the Docker config's
// credentials. The image it pushes is checked against the digest the
// release recorded first: what was verified is what goes out.
func push(dir string, plainHTTP bool) error {
	rec, err := readRecord(dir)
	if err != nil {
		return err
	}
	idx, err := readLayout(filepath.Join(dir, layoutDir))
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if digest.String() != rec.Digest {
		return fmt.Errorf("%s holds index %s, but the release recorded %s: build it again", layoutDir, digest, rec.Digest)
	}
	var opts []name.Option
	if plainHTTP {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.NewTag(rec.Image+":"+rec.Version, opts...)
	if err != nil {
		return err
	}
	say("pushing %s (%s)", tag, digest)
	if err := remote.WriteIndex(tag, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", tag, err)
	}
	// What was pushed, by digest: what the release workflow signs.
	pushed := []string{rec.Image + "@" + rec.Digest}

	clientOpts := []registry.ClientOption{registry.ClientOptWriter(os.Stderr)}
	if plainHTTP {
		clientOpts = append(clientOpts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(clientOpts...)
	if err != nil {
		return err
	}
	for _, chart := range rec.Charts {
		data, err := os.ReadFile(filepath.Join(dir, chart))
		if err != nil {
			return err
		}
		ref := chartRef(rec.Registry, chart)
		say("pushing chart %s", ref)
		res, err := client.Push(data, ref)
		if err != nil {
			return fmt.Errorf("pushing chart %s: %w", ref, err)
		}
		repo, _, _ := strings.Cut(ref[strings.LastIndex(ref, "/"):], ":")
		pushed = append(pushed, ref[:strings.LastIndex(ref, "/")]+repo+"@"+res.Manifest.Digest)
	}
	return os.WriteFile(filepath.Join(dir, pushedFile), []byte(strings.Join(pushed, "\n")+"\n"), 0o644)
}

// pushedFile lists, one per line, every reference push sent, by digest.
const pushedFile = "pushed.txt"

// chartRef is where a chart package (<name>-<version>.tgz) goes:
// <registry>/charts/<name>:<version>, what `helm install
// oci://<registry>/charts/<name> --version <version>` reads.
func chartRef(reg, pkg string) string {
	base := strings.TrimSuffix(pkg, ".tgz")
	// A chart version has no dash before its pre-release's, and a name no
	// digit after its last dash: split at the dash before the version.
	i := strings.LastIndex(base, "-")
	for i > 0 && (i+1 >= len(base) || base[i+1] < '0' || base[i+1] > '9') {
		i = strings.LastIndex(base[:i], "-")
	}
	return fmt.Sprintf("%s/charts/%s:%s", strings.TrimSuffix(reg, "/"), base[:i], base[i+1:])
}

func readRecord(dir string) (record, error) {
	var rec record
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return rec, fmt.Errorf("%w: run make release first", err)
	}
	return rec, json.Unmarshal(data, &rec)
}
