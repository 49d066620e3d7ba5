// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// imageUser is the uid and gid the operator runs as: no user of the image
// is root, and the Deployment's securityContext says the same.
const imageUser = "10001:10001"

// entrypoint is where the binary sits in the image.
const entrypoint = "/caliban-operator"

// imageMeta is what the image says about itself, beside its binary.
type imageMeta struct {
	version, revision, source string
	// created stamps every time in the image: the commit's time, so that
	// two builds of one commit are the same bytes.
	created time.Time
}

// buildImage is the operator's multi-platform OCI image: per platform one
// layer holding the static binary at /caliban-operator and a CA bundle, a
// non-root user, no shell, no base. binaries maps each platform (os/arch) to its binary.
// Every byte follows from the binaries and meta, so the index's digest
// does too.
func buildImage(binaries map[string]string, meta imageMeta) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range sortedPlatforms(binaries) {
		platform, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, err
		}
		img, err := platformImage(binaries[p], *platform, meta)
		if err != nil {
			return nil, fmt.Errorf("image for %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: platform},
		})
	}
	return idx, nil
}

func platformImage(binary string, platform v1.Platform, meta imageMeta) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	layerTar, err := tarFiles([]tarFile{
		{name: entrypoint[1:], data: data, mode: 0o555},
		{name: caBundle, data: caBundlePEM(), mode: 0o444},
	}, meta.created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: meta.created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "make release: the static caliban-operator binary", Comment: meta.version},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Variant = platform.Architecture, platform.OS, platform.Variant
	cfg.Created = created
	cfg.Config = v1.Config{
		Entrypoint: []string{entrypoint},
		User:       imageUser,
		Labels: map[string]string{
			"org.opencontainers.image.title":    "caliban-operator",
			"org.opencontainers.image.version":  meta.version,
			"org.opencontainers.image.revision": meta.revision,
			"org.opencontainers.image.source":   meta.source,
			"org.opencontainers.image.created":  meta.created.UTC().Format(time.RFC3339),
		},
	}
	return mutate.ConfigFile(img, cfg)
}

// caBundle is where Go's crypto/x509 looks for the system's roots on
// Linux (Debian's path, the first it tries).
const caBundle = "etc/ssl/certs/ca-certificates.crt"

// caBundlePEM is Mozilla's root store as x509roots/fallback carries it, in
// PEM, for an OTLP endpoint over TLS: the image has no base to bring one,
// and a file costs the operator nothing until it dials out, where the
// fallback package would parse every root at each start. Roots with a
// constraint X.509 cannot express (distrust after a date) are left out.
func caBundlePEM() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}

// tarFile is a regular file of a tar tarFiles writes.
type tarFile struct {
	name string
	data []byte
	mode int64
}

// tarFiles is a tar holding files, in order, owned by root, with every
// time set to mtime and the directories they need before them.
func tarFiles(files []tarFile, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime = mtime.UTC().Truncate(time.Second)
	made := map[string]bool{}
	for _, f := range files {
		var dirs []string
		for d := path.Dir(f.name); d != "." && !made[d]; d = path.Dir(d) {
			dirs = append([]string{d}, dirs...)
			made[d] = true
		}
		for _, d := range dirs {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Format: tar.FormatUSTAR}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeLayout writes idx as an OCI image layout in dir, named ref (the
// full <image>:<version>, in the annotations crane, skopeo and containerd
// read), so that a tar of dir loads into a node under that name (`kind
// load image-archive`) and the push target reads it.
func writeLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
		"io.containerd.image.name":          ref,
	}))
}

// readLayout reads back the one index writeLayout wrote.
func readLayout(dir string) (v1.ImageIndex, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	outer, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d entries, want the release's one index", dir, len(m.Manifests))
	}
	return outer.ImageIndex(m.Manifests[0].Digest)
}

// tarLayout writes the OCI layout in dir as one tar (an OCI archive, what
// `kind load image-archive` and `ctr images import` take), its entries in
// name order, every time mtime: one layout, one archive.
func tarLayout(dir, out string, mtime time.Time) error {
	var files []string
	if err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files = append(files, path)
		return nil
	}); err != nil {
		return err
	}
	slices.Sort(files)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			_ = f.Close()
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)),
			ModTime: mtime.UTC().Truncate(time.Second), Format: tar.FormatPAX}); err != nil {
			_ = f.Close()
			return err
		}
		if _, err := tw.Write(data); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
