// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Command chart packages the Helm charts of charts/ into .tgz files with the
// Helm SDK, stamping each chart's version and appVersion with the release
// version (make chart: VERSION, the output of git describe).
//
//	go run ./hack/chart -version v0.3.0 -out dist
//
// A leading "v" is dropped. A version that is not semantic (a bare commit
// such as 1a2b3c4, or "dev") becomes 0.0.0-<version>, which Helm accepts
// and which sorts before every release.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v4/pkg/action"
)

func main() {
	version := flag.String("version", "", "the release version (git describe), e.g. v0.3.0")
	out := flag.String("out", "dist", "the directory the packages are written to")
	var img imageStamp
	flag.StringVar(&img.repository, "repository", "", "the operator chart's image repository, when not the tree's (make release: IMAGE)")
	flag.StringVar(&img.digest, "digest", "", "the operator chart's image digest, sha256:... (make release: the built image's)")
	flag.StringVar(&img.calibandImage, "caliband-image", "", "the operator chart's agent.calibandImage, when not the tree's (make release: the pinned one)")
	flag.StringVar(&img.gitImage, "git-image", "", "the operator chart's agent.gitImage, when not the tree's (make release: the pinned one)")
	flag.Parse()
	charts := flag.Args()
	if len(charts) == 0 {
		charts = []string{"charts/caliban-crds", "charts/caliban-operator"}
	}
	if err := run(*version, *out, charts, img); err != nil {
		fmt.Fprintf(os.Stderr, "chart: %v\n", err)
		os.Exit(1)
	}
}

// imageStamp is what the operator chart's package says of its image beyond
// the tag, and of the agent pods' images: empty fields keep the tree's.
type imageStamp struct {
	repository, digest      string
	calibandImage, gitImage string
}

func run(version, out string, charts []string, img imageStamp) error {
	v, err := ChartVersion(version)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp("", "chart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	for _, dir := range charts {
		dir, err := withImageTag(dir, version, scratch, img)
		if err != nil {
			return err
		}
		p := action.NewPackage()
		p.Version = v
		p.AppVersion = v
		p.Destination = out
		path, err := p.Run(dir, nil)
		if err != nil {
			return fmt.Errorf("packaging %s: %w", dir, err)
		}
		fmt.Println(filepath.Clean(path))
	}
	return nil
}

// ChartVersion turns a release version into a chart version: the version
// without its leading "v" when that is semantic, else 0.0.0-<version>.
func ChartVersion(version string) (string, error) {
	version = strings.TrimSpace(version)
	if version == "" {
		return "", fmt.Errorf("no version: pass -version (make chart passes VERSION)")
	}
	v := strings.TrimPrefix(version, "v")
	if _, err := semver.StrictNewVersion(v); err == nil {
		return v, nil
	}
	fallback := "0.0.0-" + version
	if _, err := semver.StrictNewVersion(fallback); err != nil {
		return "", fmt.Errorf("version %q is neither semantic nor a valid pre-release identifier: %w", version, err)
	}
	return fallback, nil
}

// treeTagLine starts, and treeRepositoryLine and treeDigestLine are, the
// lines of a chart's values.yaml that name the image in the tree;
// withImageTag replaces them in the packaged copy.
const (
	treeTagLine           = "  tag: "
	treeCalibandImageLine = "  calibandImage: "
	treeGitImageLine      = "  gitImage: "
	treeRepositoryLine    = "  repository: ghcr.io/caliban-ai/caliban-operator\n"
	treeDigestLine        = "  digest: \"\"\n"
)

// withImageTag returns the chart directory to package: dir itself when its
// values.yaml has no top-level image block (the CRDs chart), else a copy in
// scratch whose image tag is version, and whose repository and digest are
// img's when set. A values.yaml with an image block but not exactly one of
// each tree line it must replace is an error, so that a reworded
// values.yaml cannot ship a chart that deploys another release's image.
func withImageTag(dir, version, scratch string, img imageStamp) (string, error) {
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return "", err
	}
	if !bytes.HasPrefix(values, []byte("image:\n")) && !bytes.Contains(values, []byte("\nimage:\n")) {
		return dir, nil
	}
	// The tree's tag is the release it deploys, whatever it is: the one
	// line that sets it is replaced.
	if n := bytes.Count(values, []byte("\n"+treeTagLine)); n != 1 {
		return "", fmt.Errorf("%s/values.yaml: want exactly one %q line to stamp the image tag, found %d", dir, strings.TrimSpace(treeTagLine), n)
	}
	i := bytes.Index(values, []byte("\n"+treeTagLine)) + 1
	tagLine := string(values[i : i+bytes.IndexByte(values[i:], '\n')+1])
	stamps := []struct{ line, value string }{{tagLine, fmt.Sprintf("  tag: %q\n", version)}}
	if img.repository != "" {
		stamps = append(stamps, struct{ line, value string }{treeRepositoryLine, fmt.Sprintf("  repository: %s\n", img.repository)})
	}
	if img.digest != "" {
		stamps = append(stamps, struct{ line, value string }{treeDigestLine, fmt.Sprintf("  digest: %q\n", img.digest)})
	}
	// The agent images' lines are replaced whatever the tree names, as the
	// tag's is.
	for _, a := range []struct{ prefix, value string }{{treeCalibandImageLine, img.calibandImage}, {treeGitImageLine, img.gitImage}} {
		if a.value == "" {
			continue
		}
		if n := bytes.Count(values, []byte("\n"+a.prefix)); n != 1 {
			return "", fmt.Errorf("%s/values.yaml: want exactly one %q line to stamp the agent image, found %d", dir, strings.TrimSpace(a.prefix), n)
		}
		i := bytes.Index(values, []byte("\n"+a.prefix)) + 1
		line := string(values[i : i+bytes.IndexByte(values[i:], '\n')+1])
		stamps = append(stamps, struct{ line, value string }{line, fmt.Sprintf("%s%q\n", a.prefix, a.value)})
	}
	for _, s := range stamps {
		if n := bytes.Count(values, []byte(s.line)); n != 1 {
			return "", fmt.Errorf("%s/values.yaml: want exactly one %q line to stamp the image, found %d", dir, strings.TrimSpace(s.line), n)
		}
		values = bytes.Replace(values, []byte(s.line), []byte(s.value), 1)
	}
	copyDir := filepath.Join(scratch, filepath.Base(dir))
	if err := os.CopyFS(copyDir, os.DirFS(dir)); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(copyDir, "values.yaml"), values, 0o644); err != nil {
		return "", err
	}
	return copyDir, nil
}
