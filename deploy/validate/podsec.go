package validate

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// PrivilegeExceptions are the pods and containers that may not meet a rule of
// CheckPodPrivilege, each with why: "<pod> automountServiceAccountToken" or
// "<pod>/<container> <field>". The manifest says the same beside the field.
var PrivilegeExceptions = map[string]string{
	"kafka/kafka readOnlyRootFilesystem": "the image's start scripts write server.properties and the log4j settings into " +
		"/opt/kafka/config, beside the defaults they start from; the data is a volume",
	"nacos/nacos runAsNonRoot": "the image has no user of its own and its start script writes as root under /home/nacos; " +
		"it holds no capability and cannot gain one",
	"nacos/nacos readOnlyRootFilesystem": "Nacos writes its logs, Tomcat's work files and Derby's log under /home/nacos at " +
		"paths its scripts fix; the data is a volume",
}

// CheckPodPrivilege checks one pod template against the least-privilege rules: no
// service account token (no pod here calls the Kubernetes API); every container
// non-root, under seccomp RuntimeDefault, with no privilege escalation, no capability
// and a read-only root filesystem. A rule a listed exception covers is skipped; the
// exceptions used are marked in used, so a stale one can be found.
func CheckPodPrivilege(pod string, spec *corev1.PodSpec, except map[string]string, used map[string]bool) []string {
	var out []string
	fail := func(key, format string, args ...any) {
		if except[key] != "" {
			used[key] = true
			return
		}
		out = append(out, fmt.Sprintf(format, args...))
	}
	if t := spec.AutomountServiceAccountToken; t == nil || *t {
		fail(pod+" automountServiceAccountToken", "%s: automountServiceAccountToken must be false", pod)
	}
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		key := pod + "/" + c.Name
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		nonRoot, seccomp := psc.RunAsNonRoot, psc.SeccompProfile
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
		if sc.SeccompProfile != nil {
			seccomp = sc.SeccompProfile
		}
		if nonRoot == nil || !*nonRoot || sc.RunAsUser != nil && *sc.RunAsUser == 0 || sc.RunAsUser == nil && psc.RunAsUser != nil && *psc.RunAsUser == 0 {
			fail(key+" runAsNonRoot", "%s: must run as non-root (runAsNonRoot: true, no user 0)", key)
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost {
			fail(key+" seccompProfile", "%s: needs seccompProfile RuntimeDefault", key)
		}
		if sc.Privileged != nil && *sc.Privileged {
			out = append(out, key+": privileged")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			fail(key+" allowPrivilegeEscalation", "%s: allowPrivilegeEscalation must be false", key)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			fail(key+" readOnlyRootFilesystem", "%s: readOnlyRootFilesystem must be true (volumes where it writes)", key)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			fail(key+" capabilities", "%s: capabilities must drop ALL", key)
		}
		if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
			out = append(out, fmt.Sprintf("%s: adds capabilities %v", key, sc.Capabilities.Add))
		}
	}
	return out
}

// KustomizeImage is one entry of a kustomization's images.
type KustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// CheckReleaseImages checks the images built here (flashsale/*) that the pods use
// (refs) against the kustomization's images: each has an entry with its release tag
// and, if any, a well-formed digest; for a release (release true) the digest is
// required, so the runtime pulls what was tested and nobody can move it.
func CheckReleaseImages(images []KustomizeImage, refs []string, release bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, ref := range refs {
		name, _, _ := strings.Cut(ref, "@")
		name, _, _ = strings.Cut(name, ":")
		if !strings.HasPrefix(name, "flashsale/") || seen[name] {
			continue
		}
		seen[name] = true
		i := slices.IndexFunc(images, func(img KustomizeImage) bool { return img.Name == name })
		if i < 0 {
			out = append(out, fmt.Sprintf("%s: kustomization.yaml sets no tag or digest for it", name))
			continue
		}
		img := images[i]
		if img.NewTag == "" {
			out = append(out, fmt.Sprintf("%s: no newTag (the release's tag, which people read)", name))
		}
		switch {
		case img.Digest != "" && !digestRe.MatchString(img.Digest):
			out = append(out, fmt.Sprintf("%s: digest %q is not sha256:<64 hex>", name, img.Digest))
		case img.Digest == "" && release:
			out = append(out, fmt.Sprintf("%s: a release pins it by digest (digest: sha256:... beside newTag; deploy/RUNBOOK.md, \"Pinning images by digest\")", name))
		}
	}
	return out
}

// CheckScaledDown: a Deployment that runs only on demand (the recovery toolbox, with
// on-call's credentials) says replicas 0; left out, Kubernetes runs one.
func CheckScaledDown(d *appsv1.Deployment) []string {
	if r := d.Spec.Replicas; r == nil || *r != 0 {
		return []string{fmt.Sprintf("Deployment %s: replicas must be 0 (scaled up for an incident and down after, deploy/RUNBOOK.md)", d.Name)}
	}
	return nil
}

// CheckCronJob: a run never overlaps the last (concurrencyPolicy Forbid: two
// archives or verifies would only fight over the same rows), a missed start is
// dropped after a deadline rather than run at any hour, a Job is stopped after its
// own deadline, and the history kept is bounded.
func CheckCronJob(cj *batchv1.CronJob) []string {
	var out []string
	s := cj.Spec
	if s.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		out = append(out, fmt.Sprintf("concurrencyPolicy %q, want Forbid", s.ConcurrencyPolicy))
	}
	if s.StartingDeadlineSeconds == nil {
		out = append(out, "no startingDeadlineSeconds: a missed start would run whenever the controller catches up")
	}
	if s.JobTemplate.Spec.ActiveDeadlineSeconds == nil {
		out = append(out, "no activeDeadlineSeconds: a stuck Job would hold its schedule forever (Forbid)")
	}
	for name, n := range map[string]*int32{"successfulJobsHistoryLimit": s.SuccessfulJobsHistoryLimit, "failedJobsHistoryLimit": s.FailedJobsHistoryLimit} {
		if n == nil || *n < 1 || *n > 10 {
			out = append(out, fmt.Sprintf("%s must be set, 1 to 10", name))
		}
	}
	return out
}
