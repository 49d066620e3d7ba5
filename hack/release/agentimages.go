// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/caliban-ai/caliban-operator/pkg/config"
)

// agentImagesFile is where a release's agent images come from
// (ADR 0031), relative to the repository's root: each setting and its
// image pinned by tag and digest, reviewed like code.
const agentImagesFile = "hack/release/agent-images.txt"

// agentImageSettings are the settings a release pins, in the file's order.
var agentImageSettings = []string{config.EnvCalibandImage, config.EnvGitImage}

// agentImages maps each of agentImageSettings to its image.
type agentImages map[string]string

// pinnedImage is <repository>:<tag>@sha256:<64 hex digits>: the tag for
// people, the digest for the kubelet, which pulls the digest whatever the
// tag names later.
var pinnedImage = regexp.MustCompile(`^([a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*):([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})@sha256:([0-9a-f]{64})$`)

// readAgentImages reads the file of agent images: one "<setting> <image>"
// per line, comments after #, each setting of agentImageSettings exactly
// once and nothing else. It does not check the images: checkPinned does.
func readAgentImages(path string) (agentImages, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	images := agentImages{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want <setting> <image>, got %q", path, n, strings.TrimSpace(line))
		}
		setting, image := fields[0], fields[1]
		known := false
		for _, s := range agentImageSettings {
			known = known || s == setting
		}
		if !known {
			return nil, fmt.Errorf("%s:%d: %s is no agent image setting (%s)", path, n, setting, strings.Join(agentImageSettings, ", "))
		}
		if _, dup := images[setting]; dup {
			return nil, fmt.Errorf("%s:%d: %s is given twice", path, n, setting)
		}
		images[setting] = image
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, s := range agentImageSettings {
		if images[s] == "" {
			return nil, fmt.Errorf("%s: no %s line", path, s)
		}
	}
	return images, nil
}

// checkPinned says why image, the value of setting taken from source (the
// file or a flag), is not one a release may run, or nil. A release that
// ran an image by tag alone would run whatever the tag names on the day a
// node pulls it, and the git image holds every private source's
// credentials.
func checkPinned(setting, image, source string) error {
	m := pinnedImage.FindStringSubmatch(image)
	how := "a release runs its agent images as <repository>:<tag>@sha256:<digest> (ADR 0031)"
	nameTag, _, digested := strings.Cut(image, "@")
	tag := ""
	if i := strings.LastIndex(nameTag, ":"); i > strings.LastIndex(nameTag, "/") {
		tag = nameTag[i+1:]
	}
	switch {
	case tag == "latest":
		return fmt.Errorf("%s: %s %s names the tag latest, which says nothing of what it is: pin a release's tag and its digest", source, setting, image)
	case tag == "":
		return fmt.Errorf("%s: %s %s has no tag: %s", source, setting, image, how)
	case m == nil && !digested:
		return fmt.Errorf("%s: %s %s is not pinned by digest: %s; write the digest you checked (crane digest %s)", source, setting, image, how, image)
	case m == nil:
		return fmt.Errorf("%s: %s %s is not <repository>:<tag>@sha256:<64 hex digits>: %s", source, setting, image, how)
	case strings.Count(m[3], m[3][:1]) == len(m[3]):
		return fmt.Errorf("%s: %s %s has a placeholder digest: write the digest of the image itself", source, setting, image)
	}
	return nil
}

// resolveAgentImages is the file's agent images with the flags' overrides
// (flags maps a setting to its flag's value, "" for unset), each checked.
func resolveAgentImages(root string, flags map[string]string, flagNames map[string]string) (agentImages, error) {
	images, err := readAgentImages(root + "/" + agentImagesFile)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, s := range agentImageSettings {
		source := agentImagesFile
		if v := flags[s]; v != "" {
			images[s], source = v, flagNames[s]
		}
		if err := checkPinned(s, images[s], source); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return images, nil
}
