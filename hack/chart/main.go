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
	for _, dir := range charts {
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
