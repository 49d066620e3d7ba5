// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/json"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caliban-ai/caliban-operator/hack/internal/manifests"
	"github.com/caliban-ai/caliban-operator/pkg/config"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/registry"
	"sigs.k8s.io/yaml"
)

var commitTime = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

// fakeBinaries writes a small file per platform, standing in for the
// operator's binaries.
func fakeBinaries(t *testing.T, content string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	bins := map[string]string{}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		path := filepath.Join(dir, strings.ReplaceAll(p, "/", "-"))
		if err := os.WriteFile(path, []byte(content+" for "+p), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[p] = path
	}
	return bins
}

func digestOf(t *testing.T, bins map[string]string, meta imageMeta) v1.Hash {
	t.Helper()
	idx, err := buildImage(bins, meta)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTheImageIsTheSameBytesFromTheSameInputs(t *testing.T) {
	meta := imageMeta{version: "v1.2.3", revision: "abc1234", source: "https://example.com/x", created: commitTime}
	first := digestOf(t, fakeBinaries(t, "operator"), meta)
	if again := digestOf(t, fakeBinaries(t, "operator"), meta); again != first {
		t.Errorf("two builds of the same binaries: %s and %s, want one digest", first, again)
	}
	later := meta
	later.created = commitTime.Add(time.Second)
	for what, d := range map[string]v1.Hash{
		"another binary":      digestOf(t, fakeBinaries(t, "operator 2"), meta),
		"another commit time": digestOf(t, fakeBinaries(t, "operator"), later),
	} {
		if d == first {
			t.Errorf("%s gives the same digest %s: the digest does not follow from the inputs", what, d)
		}
	}
}

func TestTheImageRunsTheBinaryAsNonRootOnEachPlatform(t *testing.T) {
	bins := fakeBinaries(t, "operator")
	idx, err := buildImage(bins, imageMeta{version: "v1.2.3", revision: "abc1234", created: commitTime})
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, desc := range m.Manifests {
		platforms = append(platforms, desc.Platform.String())
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != imageUser || !slices.Equal(cfg.Config.Entrypoint, []string{entrypoint}) || cfg.Architecture+"" == "" || !cfg.Created.Equal(commitTime) {
			t.Errorf("%s: user %q entrypoint %v created %v, want %s, [%s], %v", desc.Platform, cfg.Config.User, cfg.Config.Entrypoint, cfg.Created, imageUser, entrypoint, commitTime)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers, %v; want the binary's one", desc.Platform, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		h, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		want, _ := os.ReadFile(bins[desc.Platform.String()])
		if h.Name != "caliban-operator" || h.Mode != 0o555 || h.Uid != 0 || !bytes.Equal(body, want) {
			t.Errorf("%s: layer holds %s mode %o uid %d (%d bytes), want its platform's binary, 0555, root", desc.Platform, h.Name, h.Mode, h.Uid, len(body))
		}
		// The roots Go reads on Linux, for an OTLP endpoint over TLS.
		roots := x509.NewCertPool()
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Name == caBundle {
				pemData, _ := io.ReadAll(tr)
				if !roots.AppendCertsFromPEM(pemData) {
					t.Errorf("%s: %s holds no certificate", desc.Platform, caBundle)
				}
			}
		}
		_ = rc.Close()
		if len(roots.Subjects()) < 100 {
			t.Errorf("%s: the image's CA bundle has %d roots, want Mozilla's store", desc.Platform, len(roots.Subjects()))
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}
}

func TestTheInstallManifestPinsTheImageAndRollsWithTheVersion(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	templates := map[string]map[string]any{}
	agents := agentImages{
		config.EnvCalibandImage: config.DefaultCalibandImage + "@sha256:" + strings.Repeat("1a", 32),
		config.EnvGitImage:      config.DefaultGitImage + "@sha256:" + strings.Repeat("2b", 32),
	}
	for _, version := range []string{"v1.2.3", "v1.2.4"} {
		image := "registry.example/caliban-operator:" + version + "@sha256:" + strings.Repeat(version[len(version)-1:], 64)
		out, err := installManifest(root, image, agents)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, doc := range strings.Split(string(out), "\n---\n") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatal(err)
			}
			kind, _ := obj["kind"].(string)
			kinds = append(kinds, kind)
			if kind != "Deployment" {
				continue
			}
			tmpl := obj["spec"].(map[string]any)["template"].(map[string]any)
			c := tmpl["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			if c["image"] != image {
				t.Errorf("%s: the Deployment runs %v, want %s", version, c["image"], image)
			}
			got := agentImages{}
			for _, e := range c["env"].([]any) {
				e := e.(map[string]any)
				if _, ok := agents[e["name"].(string)]; ok {
					got[e["name"].(string)] = e["value"].(string)
				}
			}
			if diff := cmp.Diff(agents, got); diff != "" {
				t.Errorf("%s: the agent images the Deployment renders (-want +got):\n%s", version, diff)
			}
			templates[version] = tmpl
		}
		if kinds[0] != "CustomResourceDefinition" || !slices.Contains(kinds, "ClusterRole") || !slices.Contains(kinds, "Deployment") {
			t.Errorf("%s: kinds %v, want the CRDs first, then RBAC and the Deployment", version, kinds)
		}
		if strings.Contains(string(out), manifests.TreeImage+":latest") {
			t.Errorf("%s: the manifest names the operator's :latest image", version)
		}
		// Nor any other image by "latest": the agent pods' images are the
		// release's too (ADR 0031).
		if strings.Contains(string(out), ":latest") {
			t.Errorf("%s: the manifest names a :latest image", version)
		}
	}
	// A new pod template is what makes the Deployment roll.
	if cmp.Equal(templates["v1.2.3"], templates["v1.2.4"]) {
		t.Error("two releases render one pod template: applying the next would not roll the pod")
	}
}

func TestFillKrew(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	template, err := os.ReadFile(filepath.Join(root, "plugins", "krew", "caliban.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for i, p := range pluginPlatforms {
		sums[pluginArchive(p)] = strings.Repeat(string(rune('a'+i)), 64)
	}
	out, err := fillKrew(template, "v1.2.3", sums)
	if err != nil {
		t.Fatal(err)
	}
	var plugin struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(out, &plugin); err != nil {
		t.Fatal(err)
	}
	if plugin.Spec.Version != "v1.2.3" || len(plugin.Spec.Platforms) != len(pluginPlatforms) {
		t.Fatalf("version %q, %d platforms; want v1.2.3 and %d", plugin.Spec.Version, len(plugin.Spec.Platforms), len(pluginPlatforms))
	}
	for _, p := range plugin.Spec.Platforms {
		if want := sums[filepath.Base(p.URI)]; p.SHA256 != want || !strings.Contains(p.URI, "/v1.2.3/") {
			t.Errorf("%s: sha256 %s, want %s, and the release's URL", p.URI, p.SHA256, want)
		}
	}
	delete(sums, pluginArchive("darwin/arm64"))
	if _, err := fillKrew(template, "v1.2.3", sums); err == nil || !strings.Contains(err.Error(), "darwin_arm64") {
		t.Errorf("a missing archive: %v, want an error naming it", err)
	}
}

func TestReleaseNotes(t *testing.T) {
	changelog := []byte("# Changelog\n\n## [Unreleased]\n\n- next\n\n## [1.2.3] - 2026-12-01\n\n- fixed\n\n## [1.2.2]\n\n- older\n")
	for name, tc := range map[string]struct {
		version, want string
	}{
		"a released version gets its own section":           {"v1.2.3", "- fixed"},
		"a version the changelog lacks gets the Unreleased": {"v0.0.0-test", "- next"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := releaseNotes(changelog, tc.version)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(got, "# caliban-operator "+tc.version+"\n") || !strings.Contains(got, tc.want) || strings.Contains(got, "older") {
				t.Errorf("notes %q, want the heading and %q only", got, tc.want)
			}
		})
	}
	if _, err := releaseNotes([]byte("# Changelog\n"), "v1.0.0"); err == nil {
		t.Error("a changelog without the version or Unreleased gave notes")
	}
}

func TestChartRef(t *testing.T) {
	for pkg, want := range map[string]string{
		"caliban-operator-1.2.3.tgz":      "r.example/x/charts/caliban-operator:1.2.3",
		"caliban-crds-0.0.0-test.tgz":     "r.example/x/charts/caliban-crds:0.0.0-test",
		"caliban-operator-1.2.3-rc.1.tgz": "r.example/x/charts/caliban-operator:1.2.3-rc.1",
	} {
		if got := chartRef("r.example/x/", pkg); got != want {
			t.Errorf("chartRef(%s) = %s, want %s", pkg, got, want)
		}
	}
}

// push sends the image the release recorded and the charts to a registry
// (an in-process one here), where both can be read back.
func TestPushSendsTheReleaseToARegistry(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	dir := t.TempDir()
	idx, err := buildImage(fakeBinaries(t, "operator"), imageMeta{version: "v1.2.3", created: commitTime})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeLayout(filepath.Join(dir, layoutDir), idx, host+"/caliban/caliban-operator:v1.2.3"); err != nil {
		t.Fatal(err)
	}
	digest, _ := idx.Digest()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkg := action.NewPackage()
	pkg.Version, pkg.AppVersion, pkg.Destination = "1.2.3", "1.2.3", dir
	chartPath, err := pkg.Run(filepath.Join(root, "charts", "caliban-crds"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := record{Version: "v1.2.3", Image: host + "/caliban/caliban-operator", Digest: digest.String(), Registry: host + "/caliban",
		Charts: []string{filepath.Base(chartPath)}}
	data, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(dir, recordFile), data, 0o644); err != nil {
		t.Fatal(err)
	}

	if err := push(dir, true); err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(rec.Image+":v1.2.3", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pushed, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := pushed.Digest(); got != digest {
		t.Errorf("the registry serves %s under v1.2.3, want the release's %s", got, digest)
	}
	client, err := registry.NewClient(registry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(host + "/caliban/charts/caliban-crds:1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(pulled.Chart.Data))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Name != "caliban-crds" || ch.Metadata.Version != "1.2.3" {
		t.Errorf("pulled chart %s %s, want caliban-crds 1.2.3", ch.Metadata.Name, ch.Metadata.Version)
	}

	list, err := os.ReadFile(filepath.Join(dir, pushedFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(list))
	if len(lines) != 2 || lines[0] != rec.Image+"@"+digest.String() || !strings.HasPrefix(lines[1], host+"/caliban/charts/caliban-crds@sha256:") {
		t.Errorf("%s lists %q, want the image and the chart by digest", pushedFile, lines)
	}

	// A layout that is not what the release recorded is not pushed.
	rec.Digest = "sha256:" + strings.Repeat("0", 64)
	data, _ = json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(dir, recordFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := push(dir, true); err == nil || !strings.Contains(err.Error(), "recorded") {
		t.Errorf("push of a layout the release did not record: %v, want a refusal", err)
	}
}

// Two packages of one chart from two checkouts, whose files have other
// times, are one file once normalized.
func TestNormalizedChartsAreTheSameBytes(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for i := range 2 {
		checkout := filepath.Join(t.TempDir(), "caliban-crds")
		if err := os.CopyFS(checkout, os.DirFS(filepath.Join(root, "charts", "caliban-crds"))); err != nil {
			t.Fatal(err)
		}
		when := commitTime.Add(time.Duration(i) * time.Hour)
		if err := filepath.WalkDir(checkout, func(path string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Chtimes(path, when, when)
		}); err != nil {
			t.Fatal(err)
		}
		pkg := action.NewPackage()
		pkg.Version, pkg.AppVersion, pkg.Destination = "1.2.3", "1.2.3", t.TempDir()
		path, err := pkg.Run(checkout, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := normalizeTgz(path, commitTime); err != nil {
			t.Fatal(err)
		}
		sum, err := sha256File(path)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, sum)
		if _, err := loader.Load(path); err != nil {
			t.Fatalf("the normalized chart does not load: %v", err)
		}
	}
	if sums[0] != sums[1] {
		t.Errorf("two packages normalize to %s and %s", sums[0], sums[1])
	}
}

// A release runs its agent images by tag and digest (ADR 0031): anything
// else is refused, naming the setting, where it came from and what to
// write instead.
func TestAgentImagesMustBePinnedByTagAndDigest(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("0123456789abcdef", 4)
	tests := map[string]struct {
		image   string
		wantErr string // "" for pinned
	}{
		"a tag and a digest":                {image: "ghcr.io/caliban-ai/caliban:0.15.0" + digest},
		"a registry with a port and a path": {image: "registry.example:5000/team/git:v2.54.0" + digest},
		"a Docker Hub image with a tag":     {image: "alpine/git:v2.54.0" + digest},
		"a tag alone, as the tree names it": {image: "alpine/git:v2.54.0", wantErr: "F: CALIBAN_GIT_IMAGE alpine/git:v2.54.0 is not pinned by digest: a release runs its agent images as <repository>:<tag>@sha256:<digest> (ADR 0031); write the digest you checked (crane digest alpine/git:v2.54.0)"},
		"latest":                            {image: "ghcr.io/caliban-ai/caliban:latest", wantErr: "F: CALIBAN_GIT_IMAGE ghcr.io/caliban-ai/caliban:latest names the tag latest, which says nothing of what it is: pin a release's tag and its digest"},
		"latest, with a digest":             {image: "alpine/git:latest" + digest, wantErr: "F: CALIBAN_GIT_IMAGE alpine/git:latest" + digest + " names the tag latest, which says nothing of what it is: pin a release's tag and its digest"},
		"no tag at all":                     {image: "alpine/git", wantErr: "F: CALIBAN_GIT_IMAGE alpine/git has no tag: a release runs its agent images as <repository>:<tag>@sha256:<digest> (ADR 0031)"},
		"a registry port but no tag":        {image: "registry.example:5000/git", wantErr: "F: CALIBAN_GIT_IMAGE registry.example:5000/git has no tag: a release runs its agent images as <repository>:<tag>@sha256:<digest> (ADR 0031)"},
		"a digest without a tag":            {image: "alpine/git" + digest, wantErr: "F: CALIBAN_GIT_IMAGE alpine/git" + digest + " has no tag: a release runs its agent images as <repository>:<tag>@sha256:<digest> (ADR 0031)"},
		"a short digest":                    {image: "alpine/git:v2.54.0@sha256:0123abcd", wantErr: "F: CALIBAN_GIT_IMAGE alpine/git:v2.54.0@sha256:0123abcd is not <repository>:<tag>@sha256:<64 hex digits>: a release runs its agent images as <repository>:<tag>@sha256:<digest> (ADR 0031)"},
		"a digest in upper case":            {image: "alpine/git:v2.54.0@sha256:" + strings.Repeat("ABCDEF0123456789", 4), wantErr: "F: CALIBAN_GIT_IMAGE alpine/git:v2.54.0@sha256:" + strings.Repeat("ABCDEF0123456789", 4) + " is not <repository>:<tag>@sha256:<64 hex digits>: a release runs its agent images as <repository>:<tag>@sha256:<digest> (ADR 0031)"},
		"a placeholder of zeros":            {image: "alpine/git:v2.54.0@sha256:" + strings.Repeat("0", 64), wantErr: "F: CALIBAN_GIT_IMAGE alpine/git:v2.54.0@sha256:" + strings.Repeat("0", 64) + " has a placeholder digest: write the digest of the image itself"},
		"another algorithm":                 {image: "alpine/git:v2.54.0@sha512:" + strings.Repeat("ab", 64), wantErr: "F: CALIBAN_GIT_IMAGE alpine/git:v2.54.0@sha512:" + strings.Repeat("ab", 64) + " is not <repository>:<tag>@sha256:<64 hex digits>: a release runs its agent images as <repository>:<tag>@sha256:<digest> (ADR 0031)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkPinned(config.EnvGitImage, tc.image, "F")
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadAgentImages(t *testing.T) {
	pinned := "@sha256:" + strings.Repeat("0123456789abcdef", 4)
	tests := map[string]struct {
		file    string
		want    agentImages
		wantErr string // after "<path>"
	}{
		"both settings, comments and blank lines": {
			file: "# header\n\nCALIBAND_IMAGE ghcr.io/caliban-ai/caliban:0.15.0" + pinned + "  # caliban\nCALIBAN_GIT_IMAGE alpine/git:v2.54.0\n",
			want: agentImages{config.EnvCalibandImage: "ghcr.io/caliban-ai/caliban:0.15.0" + pinned, config.EnvGitImage: "alpine/git:v2.54.0"},
		},
		"a setting missing":     {file: "CALIBAND_IMAGE a:1\n", wantErr: ": no CALIBAN_GIT_IMAGE line"},
		"a setting twice":       {file: "CALIBAND_IMAGE a:1\nCALIBAND_IMAGE a:2\nCALIBAN_GIT_IMAGE g:1\n", wantErr: ":2: CALIBAND_IMAGE is given twice"},
		"an unknown setting":    {file: "CALIBAND_IMAGE a:1\nCALIBAN_GIT_IMAGE g:1\nCALIBAN_OTHER_IMAGE o:1\n", wantErr: ":3: CALIBAN_OTHER_IMAGE is no agent image setting (CALIBAND_IMAGE, CALIBAN_GIT_IMAGE)"},
		"a line of three words": {file: "CALIBAND_IMAGE a:1 b:2\n", wantErr: `:1: want <setting> <image>, got "CALIBAND_IMAGE a:1 b:2"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent-images.txt")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := readAgentImages(path)
			gotErr := ""
			if err != nil {
				gotErr = strings.TrimPrefix(err.Error(), path)
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); tc.wantErr == "" && diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
		})
	}
}

// The file a release reads names the operator's own defaults, by the same
// repository and tag: a release pins what the tree runs, and a default
// moved without the file (or the file without the default) fails here.
// The digests are the release's to fill in, so they are not checked: make
// release refuses to build without them.
func TestTheAgentImagesFilePinsTheOperatorsDefaults(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	images, err := readAgentImages(filepath.Join(root, agentImagesFile))
	if err != nil {
		t.Fatal(err)
	}
	s := config.DefaultAgentSettings()
	want := agentImages{config.EnvCalibandImage: s.CalibandImage, config.EnvGitImage: s.GitImage}
	got := agentImages{}
	for setting, image := range images {
		got[setting], _, _ = strings.Cut(image, "@")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s's images without their digests (-the defaults +the file):\n%s", agentImagesFile, diff)
	}
}

// make release refuses before it builds anything: no directory written, an
// error naming each agent image not pinned and where it came from.
func TestTheReleaseRefusesToBuildWithoutPinnedAgentImages(t *testing.T) {
	out := filepath.Join(t.TempDir(), "dist")
	o := options{version: "v1.2.3", image: "registry.example/caliban-operator", registry: "registry.example", out: out,
		calibandImage: "ghcr.io/caliban-ai/caliban:latest", gitImage: "alpine/git:v2.54.0"}
	err := o.run()
	want := "-caliband-image (RELEASE_CALIBAND_IMAGE): CALIBAND_IMAGE ghcr.io/caliban-ai/caliban:latest names the tag latest, which says nothing of what it is: pin a release's tag and its digest\n" +
		"-git-image (RELEASE_GIT_IMAGE): CALIBAN_GIT_IMAGE alpine/git:v2.54.0 is not pinned by digest: a release runs its agent images as <repository>:<tag>@sha256:<digest> (ADR 0031); write the digest you checked (crane digest alpine/git:v2.54.0)"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s was written (%v): the release was not refused before it built", out, err)
	}
}
