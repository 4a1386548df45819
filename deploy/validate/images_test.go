package validate

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/deploy/validate/k8sgen"
)

// imageRefs are the images the deployment runs, each with where it is named: compose,
// the shards' generator, the Kubernetes manifests and the Dockerfile's bases.
func imageRefs(t *testing.T) map[string][]string {
	t.Helper()
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string][]string{}
	for _, s := range p.Services {
		refs[s.Image] = append(refs[s.Image], "compose "+s.Name)
	}
	refs[k8sgen.RedisImage] = append(refs[k8sgen.RedisImage], "k8sgen.RedisImage")
	for _, o := range loadManifests(t) {
		for _, c := range podContainers(o) {
			refs[c.Image] = append(refs[c.Image], o.where()+" container "+c.Name)
		}
	}
	_, args := parseDockerfile(t)
	for _, a := range args {
		for _, kv := range a.Args {
			if kv.Value != nil && strings.HasSuffix(kv.Key, "_IMAGE") {
				refs[*kv.Value] = append(refs[*kv.Value], Dockerfile+" ARG "+kv.Key)
			}
		}
	}
	return refs
}

// Every image built elsewhere is pinned by tag and digest, the same in compose and
// Kubernetes; Redis has the fix of CVE-2025-49844; Alpine bases are supported today.
// The images built here (flashsale/*) name a version; kustomization may add their
// digest after the push. The runbook says how to move a pin.
func TestImagesArePinned(t *testing.T) {
	refs := imageRefs(t)
	var errs Errs
	byName := map[string]string{}
	for ref, where := range refs {
		name, _, _ := splitImage(ref)
		if strings.HasPrefix(name, "flashsale/") {
			// Built here: compose tags them $TAG (.env), kustomization.yaml sets the tag.
			if err := CheckImageRef(ref, false); err != nil {
				errs.Addf("%v: %v", where, err)
			}
			continue
		}
		checks := []error{CheckImagePinned(ref), CheckAlpineSupported(ref, time.Now()), CheckImageMinimum(ref)}
		if name == "redis" {
			checks = append(checks, CheckRedisImage(ref))
		}
		for _, err := range checks {
			if err != nil {
				errs.Addf("%v: %v", where, err)
			}
		}
		if other, ok := byName[name]; ok {
			errs.Addf("%s is pinned two ways: %s (%v) and %s (%v)", name, ref, where, other, refs[other])
		}
		byName[name] = ref
	}
	for _, img := range loadKustomization(t).Images {
		ref := img.Name + ":" + img.NewTag
		if img.Digest != "" {
			ref = img.Name + "@" + img.Digest
		}
		if err := CheckImageRef(ref, true); err != nil {
			errs.Addf("kustomization.yaml: %v", err)
		}
	}
	runbook, _ := os.ReadFile(Path("deploy", "RUNBOOK.md"))
	if !runbookAnchors(t)["pinning-images-by-digest"] || !strings.Contains(string(runbook), "imagetools inspect") {
		errs.Addf("deploy/RUNBOOK.md needs a section \"Pinning images by digest\" with the command (docker buildx imagetools inspect)")
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

// The minimum releases refuse the images this deployment ran before the review.
func TestImageMinimumRefusesOldReleases(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("0f", 32)
	for _, ok := range []string{"apache/kafka:4.3.1" + digest, "apache/kafka:4.4.0", "grafana/grafana:13.2.3", "grafana/grafana:13.3.0-ubuntu", "redis:8.10.2-alpine3.23"} {
		if err := CheckImageMinimum(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"apache/kafka:3.9.0" + digest, "apache/kafka:3.9.1", "apache/kafka:4.3.0", "grafana/grafana:11.3.0", "grafana/grafana:12.4.3", "grafana/grafana:main", "apache/kafka:4.3"} {
		if err := CheckImageMinimum(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
