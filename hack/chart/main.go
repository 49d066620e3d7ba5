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
	flag.Parse()
	charts := flag.Args()
	if len(charts) == 0 {
		charts = []string{"charts/caliban-crds", "charts/caliban-operator"}
	}
	if err := run(*version, *out, charts); err != nil {
		fmt.Fprintf(os.Stderr, "chart: %v\n", err)
		os.Exit(1)
	}
}

func run(version, out string, charts []string) error {
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
		dir, err := withImageTag(dir, version, scratch)
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

// treeTagLine is the line of a chart's values.yaml that names the image tag
// in the tree; withImageTag replaces it in the packaged copy.
const treeTagLine = "  tag: latest\n"

// withImageTag returns the chart directory to package: dir itself when its
// values.yaml has no top-level image block (the CRDs chart), else a copy in
// scratch whose image tag is version. A values.yaml with an
// image block but not exactly one tree tag line is an error, so that a
// reworded values.yaml cannot ship a chart that deploys "latest".
func withImageTag(dir, version, scratch string) (string, error) {
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return "", err
	}
	if !bytes.HasPrefix(values, []byte("image:\n")) && !bytes.Contains(values, []byte("\nimage:\n")) {
		return dir, nil
	}
	if n := bytes.Count(values, []byte(treeTagLine)); n != 1 {
		return "", fmt.Errorf("%s/values.yaml: want exactly one %q line to stamp the image tag, found %d", dir, strings.TrimSpace(treeTagLine), n)
	}
	copyDir := filepath.Join(scratch, filepath.Base(dir))
	if err := os.CopyFS(copyDir, os.DirFS(dir)); err != nil {
		return "", err
	}
	stamped := bytes.Replace(values, []byte(treeTagLine), []byte(fmt.Sprintf("  tag: %q\n", version)), 1)
	if err := os.WriteFile(filepath.Join(copyDir, "values.yaml"), stamped, 0o644); err != nil {
		return "", err
	}
	return copyDir, nil
}
