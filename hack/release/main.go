// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

// Command release builds a caliban-operator release into a directory
// (make release VERSION=vX.Y.Z), with nothing but Go and the Go module
// proxy: no container engine.
//
//	go run ./hack/release -version v0.3.0 -image ghcr.io/caliban-ai/caliban-operator -registry ghcr.io/caliban-ai -out dist
//	go run ./hack/release push -out dist
//
// It writes into -out (emptied first):
//
//   - caliban-operator-image/: the operator's image for linux/amd64 and
//     linux/arm64 as an OCI image layout, a static binary on no base, run
//     as a non-root user; every time in it is the commit's, so two builds
//     of one commit have one digest; caliban-operator-image.tar, the same
//     as one OCI archive (kind load image-archive);
//   - caliban-operator.yaml: what `kubectl apply -k manifests/` installs,
//     its Deployment running <image>:<version>@<digest>, and the agent
//     pods' images (CALIBAND_IMAGE, CALIBAN_GIT_IMAGE) those of
//     hack/release/agent-images.txt, each pinned by tag and digest;
//   - the two Helm charts, version and appVersion stamped, the operator
//     chart's image repository, tag and digest the release's, and its
//     agent images the same as the manifest's;
//   - kubectl-caliban_<os>_<arch>.tar.gz for linux and darwin on amd64 and
//     arm64, and caliban.yaml, the krew manifest filled from them;
//   - RELEASE_NOTES, the version's CHANGELOG.md section (Unreleased for
//     a version it does not name yet);
//   - SHA256SUMS over every file above, and release.json, what push and
//     the checks read.
//
// It refuses to build when an agent image is not pinned by tag and
// digest (ADR 0031): -caliband-image and -git-image (make release:
// RELEASE_CALIBAND_IMAGE, RELEASE_GIT_IMAGE) replace the file's for one
// build, under the same rule.
//
// push sends the image and the charts of a release directory to the
// registries release.json names (REGISTRY=, IMAGE=), with the
// credentials of the Docker config (~/.docker/config.json) as crane and
// helm read them.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/caliban-ai/caliban-operator/pkg/config"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "push" {
		fs := flag.NewFlagSet("push", flag.ExitOnError)
		out := fs.String("out", "dist", "the release directory")
		plainHTTP := fs.Bool("plain-http", false, "talk to the registries over plain HTTP (a local test registry)")
		_ = fs.Parse(os.Args[2:])
		if err := push(*out, *plainHTTP); err != nil {
			fmt.Fprintf(os.Stderr, "release push: %v\n", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.version, "version", "", "the release's version, vX.Y.Z[-pre] (make release: VERSION)")
	flag.StringVar(&o.image, "image", "", "the image repository the release is pushed to (make release: IMAGE)")
	flag.StringVar(&o.registry, "registry", "", "the registry and path the charts are pushed under, as <registry>/charts/<chart> (make release: REGISTRY)")
	flag.StringVar(&o.out, "out", "dist", "the directory the release is written to (emptied first)")
	flag.StringVar(&o.source, "source", "https://github.com/caliban-ai/caliban-operator", "the repository the release is built from, as the image's label and the krew manifest's download links say")
	flag.StringVar(&o.calibandImage, "caliband-image", "", "caliband's image, <repository>:<tag>@sha256:<digest>, instead of "+agentImagesFile+"'s (make release: RELEASE_CALIBAND_IMAGE)")
	flag.StringVar(&o.gitImage, "git-image", "", "the clone step's git image, <repository>:<tag>@sha256:<digest>, instead of "+agentImagesFile+"'s (make release: RELEASE_GIT_IMAGE)")
	flag.Parse()
	if err := o.run(); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

// options are release's flags.
type options struct {
	version, image, registry, out, source string
	// calibandImage and gitImage replace the agent images of
	// agentImagesFile when set.
	calibandImage, gitImage string
}

// agentImages is the release's agent images: the file's, with the flags'
// instead where set, every one pinned by tag and digest.
func (o options) agentImages(root string) (agentImages, error) {
	return resolveAgentImages(root,
		map[string]string{config.EnvCalibandImage: o.calibandImage, config.EnvGitImage: o.gitImage},
		map[string]string{config.EnvCalibandImage: "-caliband-image (RELEASE_CALIBAND_IMAGE)", config.EnvGitImage: "-git-image (RELEASE_GIT_IMAGE)"})
}

// releaseVersion is what a release may be called: vX.Y.Z with an optional
// pre-release, never a commit or "dev".
var releaseVersion = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

// record is release.json: what push and the checks read back.
type record struct {
	Version  string            `json:"version"`
	Commit   string            `json:"commit"`
	Image    string            `json:"image"`
	Digest   string            `json:"digest"`
	Registry string            `json:"registry"`
	Charts   []string          `json:"charts"`
	Plugins  map[string]string `json:"plugins"`
	// AgentImages are the agent pods' images, by setting, as the manifest
	// and the chart run them.
	AgentImages agentImages `json:"agentImages"`
}

func (o options) run() error {
	if !releaseVersion.MatchString(o.version) {
		return fmt.Errorf("VERSION %q is not vX.Y.Z[-pre]: a release is named by a semantic version, e.g. make release VERSION=v0.3.0", o.version)
	}
	if o.image == "" || strings.ContainsAny(o.image, "@") || imageTag(o.image) != "" {
		return fmt.Errorf("IMAGE %q is not an image repository without a tag, e.g. ghcr.io/caliban-ai/caliban-operator", o.image)
	}
	if o.registry == "" {
		return fmt.Errorf("REGISTRY is empty: the charts go to <REGISTRY>/charts")
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	// Checked before anything is built: a release without its agent
	// images pinned is refused, not built and then found wanting.
	agents, err := o.agentImages(root)
	if err != nil {
		return err
	}
	commit, epoch, err := headCommit(root)
	if err != nil {
		return err
	}
	out, err := filepath.Abs(o.out)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp("", "release-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	rec := record{Version: o.version, Commit: commit, Image: o.image, Registry: o.registry, Plugins: map[string]string{}, AgentImages: agents}

	// The image.
	binaries := map[string]string{}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		bin := filepath.Join(scratch, "operator", p, "caliban-operator")
		if err := goBuild(root, p, "./cmd/caliban-operator", bin, o.version, commit); err != nil {
			return err
		}
		binaries[p] = bin
	}
	idx, err := buildImage(binaries, imageMeta{version: o.version, revision: commit, source: o.source, created: epoch})
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	rec.Digest = digest.String()
	if err := writeLayout(filepath.Join(out, layoutDir), idx, o.image+":"+o.version); err != nil {
		return err
	}
	if err := tarLayout(filepath.Join(out, layoutDir), filepath.Join(out, layoutArchive), epoch); err != nil {
		return err
	}
	pinned := fmt.Sprintf("%s:%s@%s", o.image, o.version, rec.Digest)
	say("image %s", pinned)

	// The install manifest and the charts, both running that image.
	for _, s := range agentImageSettings {
		say("%s %s", s, agents[s])
	}
	manifest, err := installManifest(root, pinned, agents)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, installFile), manifest, 0o644); err != nil {
		return err
	}
	charts, err := packageCharts(root, out, o.version, o.image, rec.Digest, agents)
	if err != nil {
		return err
	}
	for _, c := range charts {
		if err := normalizeTgz(filepath.Join(out, c), epoch); err != nil {
			return err
		}
	}
	rec.Charts = charts

	// kubectl-caliban and its krew manifest.
	for _, p := range pluginPlatforms {
		bin := filepath.Join(scratch, "plugin", p, "kubectl-caliban")
		if err := goBuild(root, p, "./cmd/kubectl-caliban", bin, o.version, commit); err != nil {
			return err
		}
		archive := pluginArchive(p)
		if err := archivePlugin(bin, filepath.Join(out, archive), epoch); err != nil {
			return err
		}
		if rec.Plugins[p], err = sha256File(filepath.Join(out, archive)); err != nil {
			return err
		}
	}
	template, err := os.ReadFile(filepath.Join(root, "plugins", "krew", "caliban.yaml"))
	if err != nil {
		return err
	}
	archives := map[string]string{}
	for p, sum := range rec.Plugins {
		archives[pluginArchive(p)] = sum
	}
	krew, err := fillKrew(template, o.version, archives)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, krewFile), krew, 0o644); err != nil {
		return err
	}

	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return err
	}
	notes, err := releaseNotes(changelog, o.version)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, notesFile), []byte(notes), 0o644); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, recordFile), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if _, err := writeSums(out); err != nil {
		return err
	}
	say("wrote %s", out)
	return nil
}

// The files of a release directory.
const (
	layoutDir     = "caliban-operator-image"
	layoutArchive = "caliban-operator-image.tar"
	installFile   = "caliban-operator.yaml"
	krewFile      = "caliban.yaml"
	notesFile     = "RELEASE_NOTES"
	recordFile    = "release.json"
)

// goBuild builds pkg for platform (os/arch) into out: static, without
// paths or build ids, stamped with version and commit, so that one commit
// builds the same bytes anywhere.
func goBuild(root, platform, pkg, out, version, commit string) error {
	goos, goarch, _ := strings.Cut(platform, "/")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", fmt.Sprintf("-s -w -buildid= -X main.version=%s -X main.commit=%s", version, commit),
		"-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	say("go build %s for %s", pkg, platform)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s for %s: %w", pkg, platform, err)
	}
	return nil
}

// packageCharts packages charts/ into out with hack/chart, the operator
// chart's image and agent images the release's, and returns the packages'
// names.
func packageCharts(root, out, version, image, digest string, agents agentImages) ([]string, error) {
	cmd := exec.Command("go", "run", "./hack/chart", "-version", version, "-repository", image, "-digest", digest,
		"-caliband-image", agents[config.EnvCalibandImage], "-git-image", agents[config.EnvGitImage], "-out", out,
		"charts/caliban-crds", "charts/caliban-operator")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("packaging the charts: %w", err)
	}
	var names []string
	for _, line := range strings.Fields(string(stdout)) {
		names = append(names, filepath.Base(line))
	}
	return names, nil
}

// headCommit is HEAD's short id and time: the time every file and image
// of the release is stamped with. SOURCE_DATE_EPOCH, when set, wins.
func headCommit(root string) (string, time.Time, error) {
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%h %ct").Output()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("reading HEAD's commit (a release is built from a git clone): %w", err)
	}
	id, secs, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		secs = v
	}
	n, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("commit time %q: %w", secs, err)
	}
	return id, time.Unix(n, 0).UTC(), nil
}

// repoRoot is the directory holding go.mod, from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory: run release from the repository")
		}
		dir = parent
	}
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "release: "+format+"\n", args...)
}
