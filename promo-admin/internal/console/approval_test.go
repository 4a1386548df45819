package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/promo-admin/internal/adminservice"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// TestConsoleApproval clicks through the approval queue in headless Chromium
// against an in-process promo-admin that requires approval: the merchandiser's
// create and change are sent for approval (nothing applied), the queue shows them
// readably with no buttons for the merchandiser; an approver approves the create;
// the proposer's own approver token is refused SELF_APPROVAL, an empty reason is
// refused, each with the service's message; a reject with a reason and a stale
// approval land in the history filters.
func TestConsoleApproval(t *testing.T) {
	t.Parallel()
	o := admintest.Options{Service: adminservice.Config{RequireApproval: true}}
	e, b, id := startSignedIn(t, o, "console-ap-")
	c := &approvalRun{e: e, b: b, id: id, path: "/v1/promotions/" + id + "/1"}

	created := c.proposeCreate()
	c.approveCreate(created)
	changed := c.proposeChange()
	c.refuseSelfApproval(changed)
	c.reject(changed)
	c.staleApproval()
}

// approvalRun is TestConsoleApproval's promotion, proposed and decided in b.
type approvalRun struct {
	e        *admintest.Env
	b        *browser
	id, path string
}

// item selects proposal n's entry in the queue.
func item(n int64) string { return fmt.Sprintf(`#proposals li[data-proposal-id="%d"]`, n) }

var sentFor = regexp.MustCompile(`^Sent for approval, proposal #(\d+): `)

// sent waits for the status line saying a proposal was sent, and returns its id.
func (c *approvalRun) sent(what string) int64 {
	s := c.b.waitText(15*time.Second, "#status", func(s string) bool { return sentFor.MatchString(s) }, what+" sent for approval")
	n, _ := strconv.ParseInt(sentFor.FindStringSubmatch(s)[1], 10, 64)
	return n
}

// proposal reads proposal n from the API.
func (c *approvalRun) proposal(n int64) adminservice.Proposal {
	c.b.t.Helper()
	r := c.e.Do(http.MethodGet, fmt.Sprintf("/v1/proposals/%d", n), admintest.ViewerToken, nil)
	var p adminservice.Proposal
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &p) != nil {
		c.b.fail("GET proposal %d: %s", n, r)
	}
	return p
}

// switchTo signs out and in again with token.
func (c *approvalRun) switchTo(token string) {
	b := c.b
	b.click("#sign-out")
	b.waitFor(15*time.Second, "the sign-in form", func() bool { return b.visible("#sign-in") })
	b.signIn(c.e.Server.URL, token)
}

// show picks a filter of the queue, as a merchandiser would.
func (c *approvalRun) show(status string) {
	q, _ := json.Marshal(status)
	eval[bool](c.b, fmt.Sprintf(`(() => { const s = document.querySelector("#proposal-filter"); s.value = %s;
		s.dispatchEvent(new Event("change")); return true })()`, q))
}

// lines waits until proposal n's entry holds every one of want.
func (c *approvalRun) lines(n int64, what string, want ...string) {
	c.b.t.Helper()
	c.b.waitText(15*time.Second, item(n), func(s string) bool {
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	}, what)
}

func (c *approvalRun) proposeCreate() int64 {
	b := c.b
	b.fillCreate(c.id, "10")
	b.click(`#create-form input[name="channel"][value="WEB"]`)
	b.click(`#create-form button[type="submit"]`)
	n := c.sent("the create")
	if r := c.e.Do(http.MethodGet, c.path, admintest.ViewerToken, nil); r.Status != http.StatusNotFound {
		b.fail("a proposed create is applied: %s", r)
	}
	if p := c.proposal(n); p.Status != "PENDING" || p.Kind != "CREATE" || p.Proposer.Name != admintest.MerchandiserName {
		b.fail("the API's proposal %d: %+v", n, p)
	}
	c.lines(n, "the create in the queue", "CREATE", c.id+" / 1", "PENDING", "total 10", "channels WEB",
		"Proposed by "+admintest.MerchandiserName+" (merchandiser)")
	if b.visible(item(n) + " button.approve") {
		b.fail("a merchandiser is offered Approve")
	}
	b.screenshot("20-create-proposed")
	return n
}

func (c *approvalRun) approveCreate(n int64) {
	b := c.b
	c.switchTo(admintest.ApproverToken)
	b.waitFor(15*time.Second, "Approve offered to the approver", func() bool { return b.visible(item(n) + " button.approve") })
	c.approverView()
	b.screenshot("21-approver-queue")
	b.click(item(n) + " button.approve")
	b.waitTextIs(15*time.Second, "#status", fmt.Sprintf("Approved proposal #%d: %s/1 created.", n, c.id))
	if p := c.e.Do(http.MethodGet, c.path, admintest.ViewerToken, nil).Promotion(); p.Total != 10 || p.Channels.String() != "WEB" {
		b.fail("the approved create: %+v", p)
	}
	c.e.Agree(c.id, 1)
	b.waitFor(15*time.Second, "the approved proposal out of the pending list", func() bool { _, ok := b.text(item(n)); return !ok })
	c.show("")
	c.lines(n, "the approval in the history", "APPROVED", "Approved by "+admintest.ApproverName+" (approver)")
	c.show("PENDING")
}

// approverView: the page asked GET /v1/whoami, never probed the approve route,
// shows the approver by name and role, lists the promotions (an approver reads
// them) and offers no create, no change and no switches.
func (c *approvalRun) approverView() {
	b := c.b
	b.waitTextIs(15*time.Second, "#whoami", admintest.ApproverName+" (approver)")
	b.waitFor(15*time.Second, "the promotions listed for the approver", func() bool { return b.visible("#promotions") })
	asked := eval[[]string](b, `performance.getEntriesByType("resource").map((e) => new URL(e.name).pathname)
		.filter((p) => p === "/v1/whoami" || /^\/v1\/proposals\/0\//.test(p))`)
	if !slices.Contains(asked, "/v1/whoami") || slices.ContainsFunc(asked, func(p string) bool { return p != "/v1/whoami" }) {
		b.fail("the page's calls: %v, want GET /v1/whoami and no probe of /v1/proposals/0/", asked)
	}
	for _, sel := range []string{"#create", "#switches"} {
		if b.visible(sel) {
			b.fail("the approver is offered %s", sel)
		}
	}
}

// proposeChange sends a change of total and channels for approval through the
// change form; the queue shows each from its value to the proposed one.
func (c *approvalRun) proposeChange() int64 {
	b := c.b
	c.switchTo(admintest.AdminToken)
	row := fmt.Sprintf(`tr[data-key="%s/1"]`, c.id)
	b.waitFor(15*time.Second, "the promotion listed", func() bool { return b.visible(row) })
	b.click(row + " button.link")
	b.waitTextIs(15*time.Second, "#detail-of", "of 10")
	b.fill("#patch-total", "20")
	b.click(`#patch-form input[name="channel"][value="APP"]`)
	b.click(`#patch-form button[type="submit"]`)
	n := c.sent("the change")
	if p := c.e.Do(http.MethodGet, c.path, admintest.ViewerToken, nil).Promotion(); p.Total != 10 || p.Channels.String() != "WEB" {
		b.fail("a proposed change is applied: %+v", p)
	}
	if v := eval[string](b, `document.querySelector("#patch-total").value`); v != "10" {
		b.fail("the change form shows total %s, not the promotion's own while the change waits", v)
	}
	b.waitTextIs(time.Second, "#detail-of", "of 10")
	c.lines(n, "the change in the queue", "PATCH", "total 10 → 20", "channels WEB → APP, WEB", "PENDING")
	if s, _ := b.text(item(n)); strings.Contains(s, "endAt") {
		b.fail("the change names endAt, which the form left as it was: %q", s)
	}
	b.waitText(15*time.Second, "#detail-pending", func(s string) bool {
		return strings.HasPrefix(s, fmt.Sprintf("Waiting for approval: #%d (total 10 → 20, channels WEB → APP, WEB)", n))
	}, "the detail view saying the change waits")
	b.waitText(15*time.Second, "#detail-history li:first-child", func(s string) bool {
		return strings.Contains(s, fmt.Sprintf("PROPOSED by %s (merchandiser): proposal #%d (PATCH)", admintest.MerchandiserName, n))
	}, "the proposal first in the promotion's history")
	b.screenshot("22-change-proposed")
	return n
}

// refuseSelfApproval: an approver token under the proposer's own name is refused
// with the service's message, and nothing is applied.
func (c *approvalRun) refuseSelfApproval(n int64) {
	b := c.b
	r := c.e.Do(http.MethodPost, fmt.Sprintf("/v1/proposals/%d/approve", n), admintest.SelfApproverToken, nil)
	if r.Status != http.StatusForbidden || r.Error().Code != "SELF_APPROVAL" {
		b.fail("the proposer's own approval: %s", r)
	}
	want := "SELF_APPROVAL: " + r.Error().Message
	c.switchTo(admintest.SelfApproverToken)
	b.waitFor(15*time.Second, "Approve offered", func() bool { return b.visible(item(n) + " button.approve") })
	b.click(item(n) + " button.approve")
	b.waitTextIs(15*time.Second, item(n)+` [data-cell="error"]`, want)
	b.waitTextIs(15*time.Second, "#status", fmt.Sprintf("Proposal #%d not approved: %s", n, want))
	if p := c.proposal(n); p.Status != "PENDING" {
		b.fail("a refused self-approval decided proposal %d: %+v", n, p)
	}
	b.screenshot("23-self-approval-refused")
}

// reject: an empty reason is refused by the reason with the service's message; a
// reason rejects the proposal, shown in the Rejected filter with its reason.
func (c *approvalRun) reject(n int64) {
	b := c.b
	c.switchTo(admintest.ApproverToken)
	r := c.e.Do(http.MethodPost, fmt.Sprintf("/v1/proposals/%d/reject", n), admintest.ApproverToken, `{"reason": ""}`)
	if r.Status != http.StatusBadRequest || r.Error().Field != "reason" {
		b.fail("an empty reason: %s", r)
	}
	b.waitFor(15*time.Second, "Reject offered", func() bool { return b.visible(item(n) + " button.reject") })
	// The approver reads the promotion, so the change shows from its current value.
	c.lines(n, "the change from its current value, for the approver", "total 10 → 20", "channels WEB → APP, WEB")
	row := fmt.Sprintf(`tr[data-key="%s/1"]`, c.id)
	b.waitFor(15*time.Second, "the promotion listed for the approver", func() bool { return b.visible(row) })
	b.click(row + " button.link")
	b.waitTextIs(15*time.Second, "#detail-of", "of 10")
	b.waitText(15*time.Second, "#detail-history li:first-child", func(s string) bool { return strings.Contains(s, "PROPOSED") },
		"the promotion's history for the approver")
	if b.visible("#patch-form") || b.visible("#stop-open") || b.visible("#delete-open") {
		b.fail("the approver is offered the change, stop or delete of a promotion")
	}
	b.click("#close-detail")
	b.click(item(n) + " button.reject")
	b.waitFor(15*time.Second, "the reject dialog", func() bool { return b.visible("#reject-dialog") })
	b.click(`#reject-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, `#reject-form [data-error-for="reason"]`, r.Error().Message)
	b.fill("#reject-reason", "twice the stock is too much")
	b.click(`#reject-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, "#status", fmt.Sprintf("Rejected proposal #%d.", n))
	if b.visible("#reject-dialog") {
		b.fail("the reject dialog stays open")
	}
	if p := c.e.Do(http.MethodGet, c.path, admintest.ViewerToken, nil).Promotion(); p.Total != 10 {
		b.fail("a rejected change applied: %+v", p)
	}
	c.show("REJECTED")
	c.lines(n, "the rejection with its reason", "REJECTED", "Rejected by "+admintest.ApproverName+" (approver)", ": twice the stock is too much")
	b.screenshot("24-rejected")
	c.show("PENDING")
}

// staleApproval: of two changes made against the same version, the second one
// approved is refused PROPOSAL_STALE, shown, and listed FAILED.
func (c *approvalRun) staleApproval() {
	b := c.b
	var ids []int64
	for _, total := range []int{30, 40} {
		r := c.e.Do(http.MethodPatch, c.path, admintest.AdminToken, map[string]any{"total": total})
		var p adminservice.Proposal
		if r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &p) != nil {
			b.fail("propose total %d: %s", total, r)
		}
		ids = append(ids, p.ID)
	}
	b.click("#proposals-refresh")
	for _, n := range ids {
		b.waitFor(15*time.Second, "both changes offered", func() bool { return b.visible(item(n) + " button.approve") })
	}
	b.click(item(ids[0]) + " button.approve")
	b.waitTextIs(15*time.Second, "#status", fmt.Sprintf("Approved proposal #%d: %s/1 changed.", ids[0], c.id))
	b.click(item(ids[1]) + " button.approve")
	b.waitText(15*time.Second, "#status", func(s string) bool {
		return strings.HasPrefix(s, fmt.Sprintf("Proposal #%d not approved: PROPOSAL_STALE: ", ids[1]))
	}, "the stale approval refused")
	if p := c.e.Do(http.MethodGet, c.path, admintest.ViewerToken, nil).Promotion(); p.Total != 30 {
		b.fail("after the stale approval: %+v", p)
	}
	c.show("FAILED")
	c.lines(ids[1], "the stale proposal failed", "FAILED", "total → 40")
	b.screenshot("25-stale-failed")
}

// TestConsoleApprovalPages pages through the queue: 21 creates waiting are one
// page of 20, newest first, and a next page with the oldest; a viewer reads the
// queue and is offered no decision.
func TestConsoleApprovalPages(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{Service: adminservice.Config{RequireApproval: true}})
	var ids []int64
	for i := range 21 {
		r := e.Do(http.MethodPost, "/v1/promotions", admintest.AdminToken, e.Spec(fmt.Sprintf("console-pages-%d", i)))
		var p adminservice.Proposal
		if r.Status != http.StatusAccepted || json.Unmarshal(r.Body, &p) != nil {
			t.Fatalf("propose create %d: %s", i, r)
		}
		ids = append(ids, p.ID)
	}
	b := startBrowser(t, screenshotDir(t))
	b.signIn(e.Server.URL, admintest.ViewerToken)
	count := func() int { return eval[int](b, `document.querySelectorAll("#proposals > li").length`) }
	b.waitFor(15*time.Second, "the first page of 20", func() bool { return count() == 20 && b.visible(item(ids[20])) })
	if b.visible(item(ids[0])) || b.visible("#proposals button") {
		b.fail("the first page holds the oldest proposal, or offers a viewer a decision")
	}
	b.click("#proposals-next")
	b.waitFor(15*time.Second, "the next page with the oldest alone", func() bool { return count() == 1 && b.visible(item(ids[0])) })
	if b.visible("#proposals-next") || !b.visible("#proposals-first") {
		b.fail("the last page offers another, or no way back")
	}
	time.Sleep(6 * time.Second) // a refresh of the queue keeps the page shown
	if count() != 1 {
		b.fail("the queue's refresh left the page: %d proposals shown", count())
	}
	b.click("#proposals-first")
	b.waitFor(15*time.Second, "the first page again", func() bool { return count() == 20 })
}
