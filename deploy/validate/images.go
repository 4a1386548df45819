package validate

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/semver"
)

var (
	digestRe  = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	versionRe = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)*([-+._][A-Za-z0-9]+)*$`)
	alpineRe  = regexp.MustCompile(`(?:^|-)alpine([0-9]+\.[0-9]+)?(?:$|[-.])`)
)

// splitImage parses name[:tag][@digest]; a registry's port (host:5000/name) is not a tag.
func splitImage(ref string) (name, tag, digest string) {
	name, digest, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	return name, tag, digest
}

// CheckImageRef: an image names its version. It has a tag, never latest, and with
// versioned the tag is a version (8.10.2-alpine3.23, v2.53.3), not a moving name
// (stable, dev); a digest, if any, is well formed. A digest alone (name@sha256:...)
// will do where a tool sets it (kustomization's digest for the images built here).
func CheckImageRef(ref string, versioned bool) error {
	name, tag, digest := splitImage(ref)
	switch {
	case digest != "" && !digestRe.MatchString(digest):
		return fmt.Errorf("image %q: %q is not a sha256 digest", ref, digest)
	case name == "":
		return fmt.Errorf("image %q names no image", ref)
	case tag == "" && digest != "":
		return nil
	case tag == "":
		return fmt.Errorf("image %q has no tag: it runs whatever latest is on the day", ref)
	case tag == "latest":
		return fmt.Errorf("image %q: latest is no version", ref)
	case versioned && !versionRe.MatchString(tag):
		return fmt.Errorf("image %q: tag %q is not a version", ref, tag)
	}
	return nil
}

// CheckImagePinned: an image built elsewhere names its version, for people, and its
// digest, for the machine (name:tag@sha256:...). A tag can be moved to other content
// by whoever controls the repository; a digest is the content.
func CheckImagePinned(ref string) error {
	name, tag, digest := splitImage(ref)
	if _, ok := DigestOnly[name]; ok && tag == "" && digest != "" {
		return CheckImageRef(ref, true)
	}
	if tag == "" || digest == "" {
		return fmt.Errorf("image %q is not pinned by tag and digest (name:tag@sha256:...); deploy/RUNBOOK.md, \"Pinning images by digest\", says how", ref)
	}
	return CheckImageRef(ref, true)
}

// DigestOnly are the images pinned by digest alone, and why: no release tag of theirs
// has an index digest on public record to pin beside it.
var DigestOnly = map[string]string{
	"danielqsj/kafka-exporter": "the multi-platform build of its master of 2026-04-13, after v1.9.0; no release tag's index digest is on record",
}

// RedisMinimum is the oldest Redis the platform runs on; redisFixed is, for each
// release line, its first release with the fix of CVE-2025-49844 (a use-after-free in
// the Lua parser: remote code execution by any client allowed EVAL, and every grab is a
// script). Lines after 8.2 had the fix from their first release.
const RedisMinimum = "7.2.11"

var redisFixed = map[string]string{"7.2": "7.2.11", "7.4": "7.4.6", "8.0": "8.0.4", "8.2": "8.2.2"}

// CheckRedisImage: the Redis image is at least RedisMinimum and has its line's fix.
func CheckRedisImage(ref string) error {
	_, tag, _ := splitImage(ref)
	version, _, _ := strings.Cut(tag, "-")
	v := "v" + version
	if !semver.IsValid(v) || strings.Count(version, ".") != 2 {
		return fmt.Errorf("redis image %q: tag %q does not start with a release (x.y.z)", ref, tag)
	}
	if semver.Compare(v, "v"+RedisMinimum) < 0 {
		return fmt.Errorf("redis image %q: %s is older than %s (CVE-2025-49844, remote code execution through Lua)", ref, version, RedisMinimum)
	}
	if fixed, ok := redisFixed[strings.TrimPrefix(semver.MajorMinor(v), "v")]; ok && semver.Compare(v, "v"+fixed) < 0 {
		return fmt.Errorf("redis image %q: %s lacks the fix of CVE-2025-49844 (its line has it from %s)", ref, version, fixed)
	}
	return nil
}

// alpineEndOfSupport is when each Alpine release stops getting security fixes in main
// (alpinelinux.org/releases: two years from its release; 3.24's by that rule).
var alpineEndOfSupport = map[string]string{
	"3.19": "2025-11-01", "3.20": "2026-04-01", "3.21": "2026-11-01",
	"3.22": "2027-05-01", "3.23": "2027-11-01", "3.24": "2028-05-01",
}

// CheckAlpineSupported: an image on Alpine names its release (alpine:3.24.2,
// redis:8.10.2-alpine3.23), and on the day (today) that release still gets security
// fixes. A bare "-alpine" tag hides which release it is, so it is refused. Releases
// newer than the table are taken as supported; older ones are not.
func CheckAlpineSupported(ref string, today time.Time) error {
	name, tag, _ := splitImage(ref)
	var release string
	switch {
	case name == "alpine" || strings.HasSuffix(name, "/alpine"):
		parts := strings.Split(tag, ".")
		if len(parts) < 2 {
			return fmt.Errorf("image %q: name the Alpine release (alpine:3.24.2)", ref)
		}
		release = parts[0] + "." + parts[1]
	default:
		m := alpineRe.FindStringSubmatch(tag)
		if m == nil {
			return nil // not Alpine, or not said in the tag
		}
		if m[1] == "" {
			return fmt.Errorf("image %q: a bare -alpine tag hides which Alpine release it is; name it (-alpine3.23)", ref)
		}
		release = m[1]
	}
	end, ok := alpineEndOfSupport[release]
	if !ok {
		byVersion := func(a, b string) int { return semver.Compare("v"+a, "v"+b) }
		if byVersion(release, slices.MaxFunc(slices.Collect(maps.Keys(alpineEndOfSupport)), byVersion)) > 0 {
			return nil
		}
		return fmt.Errorf("image %q: Alpine %s is past its support", ref, release)
	}
	if endDay, _ := time.Parse(time.DateOnly, end); !today.Before(endDay) {
		return fmt.Errorf("image %q: Alpine %s has had no security fixes since %s; move to a supported release", ref, release, end)
	}
	return nil
}

// ImageMinimum is the oldest release of an image the deployment may run, and why.
type ImageMinimum struct{ Version, Why string }

// ImageMinimums: the releases a security review moved these images to. Older ones
// carry published vulnerabilities an attacker inside the network (or, for Grafana, a
// viewer's browser) can use; a pin may move forward, never back below these.
var ImageMinimums = map[string]ImageMinimum{
	"apache/kafka":    {"4.3.1", "3.9.0 and older lines lack the fixes of CVE-2025-27817 (arbitrary file read and SSRF through SASL/OAUTHBEARER settings) and CVE-2025-27818/27819 (code execution through JAAS login modules a client may name)"},
	"grafana/grafana": {"13.2.3", "11.3.0 lacks the fixes of CVE-2025-4123 (cross-site scripting through an open redirect) and CVE-2025-6023 among later ones; 13.2.3 is the current release line's patch"},
}

// CheckImageMinimum: an image listed in ImageMinimums is at least that release. A tag
// that is no release (x.y.z, a leading v allowed) is refused for those images.
func CheckImageMinimum(ref string) error {
	name, tag, _ := splitImage(ref)
	min, ok := ImageMinimums[name]
	if !ok {
		return nil
	}
	version, _, _ := strings.Cut(strings.TrimPrefix(tag, "v"), "-")
	if !semver.IsValid("v"+version) || strings.Count(version, ".") != 2 {
		return fmt.Errorf("image %q: tag %q does not start with a release (x.y.z)", ref, tag)
	}
	if semver.Compare("v"+version, "v"+min.Version) < 0 {
		return fmt.Errorf("image %q: %s is older than %s: %s", ref, version, min.Version, min.Why)
	}
	return nil
}
