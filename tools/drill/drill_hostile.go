package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/tools/checker"
	"github.com/flashsale/platform/tools/loadgen"
)

// hostileDrill storms the API with hostile input: every case a 4xx, nothing changed.
func hostileDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	canary := sale{Promotion: checker.Promotion{PromoID: d.run + "-canary", Type: 1, Total: 100, PerPin: 2, PerIP: 5}}
	if !d.createCanary(ctx, canary.Promotion, 2, "drill canary", out) {
		return
	}
	g1 := d.load.legit(canary, d.run+"-canary-pin1", "10.98.0.1", false)
	g2 := d.load.legit(canary, d.run+"-canary-pin2", "10.98.0.2", true)
	if g1.Grab != "GRANTED" || g2.Grab != "GRANTED" || g2.Cancel != "RETURNED" {
		out.fail("canary set-up: grab %s, grab %s then cancel %s", g1.Grab, g2.Grab, g2.Cancel)
		return
	}
	key := canary.Key()
	shard := d.src.Shards[ringShard(key)]
	before, err := readCanary(ctx, shard, key)
	if err != nil {
		out.fail("read the canary: %v", err)
		return
	}
	h := hostileRun{ctx: ctx, d: d}
	res, slowTried, slowHeld := h.storm(hostileCases(d.run, d.checkout, d.viewer, d.admin, canary, g1, g2))
	h.sendRawCases(canary, &res)
	out.bad = res.tried + slowTried
	for _, f := range res.findings {
		out.fail("%s", f)
	}
	for _, f := range slowHeld {
		out.fail("%s", f)
	}
	h.nothingChanged(shard, key, before, out)
}

// hostileRun is one run of the hostile drill.
type hostileRun struct {
	ctx context.Context
	d   *drillEnv
}

// storm sends every case three times over 8 workers while slow clients hold
// connections open, and returns what the cases and the slow clients found.
func (h hostileRun) storm(cases []hostileCase) (res hostileResult, slowTried int, slowHeld []string) {
	d := h.d
	client := loadgen.Client(16, 15*time.Second)
	bases := map[string]string{"grab": d.ctl.st.Grab, "admin": d.ctl.st.Admin}
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// ReadHeaderTimeout (2 s) ends a slow header, ReadTimeout (5 s) a slow body.
		slowTried, slowHeld = slowClients(strings.TrimPrefix(d.ctl.st.Grab, "http://"), 40, 7*time.Second)
	}()
	jobs := make(chan hostileCase)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				res.send(client, bases, c, &mu)
			}
		}()
	}
	for rep := 0; rep < 3; rep++ {
		for _, c := range cases {
			jobs <- c
		}
	}
	close(jobs)
	wg.Wait()
	return res, slowTried, slowHeld
}

// sendRawCases writes the raw cases to grab-service's socket; a raw request
// smuggling a grab must not grant it: its body is a valid grab of the canary.
func (h hostileRun) sendRawCases(canary sale, res *hostileResult) {
	d := h.d
	smuggled := string(grabJSON(q(d.run+"-hx-199"), q(d.run+"-hostile"), q("10.99.0.1"), fmt.Sprintf(`[{"promoId":%s,"type":1,"num":1}]`, q(canary.PromoID))))
	host := strings.TrimPrefix(d.ctl.st.Grab, "http://")
	for name, raw := range rawCases(host, smuggled) {
		res.tried++
		code, err := sendRaw(host, raw)
		// The one 5xx allowed: net/http refuses an HTTP version it does not speak with
		// 505 before any request exists (RFC 9110, 15.6.6); no handler is reached.
		if name == "raw: unknown protocol version" && code == http.StatusHTTPVersionNotSupported {
			continue
		}
		if err != nil || code < 400 || code > 499 {
			res.find("%s: answered %d (err %v), want a 4xx", name, code, err)
		}
	}
}

// nothingChanged checks the storm left everything as it was: the canary, the
// request index, the record, promo-admin.
func (h hostileRun) nothingChanged(shard redis.UniversalClient, key string, before canaryState, out *outcome) {
	ctx, d := h.ctx, h.d
	after, err := readCanary(ctx, shard, key)
	if err != nil {
		out.fail("read the canary: %v", err)
		return
	}
	for _, diff := range diffCanary(before, after) {
		out.fail("bad input changed state: %s", diff)
	}
	for i := 1; i <= 200; i++ {
		rid := fmt.Sprintf("%s-hx-%d", d.run, i)
		if n, _ := indexShard(d.src.Shards, rid).Exists(ctx, promo.RequestIndexKey(rid)).Result(); n > 0 {
			out.fail("bad input left a request index entry %s", promo.RequestIndexKey(rid))
		}
	}
	var rows int
	if err := d.db.DB().GetContext(ctx, &rows, `SELECT COUNT(*) FROM grab_flow WHERE request_id LIKE ?`, d.run+"-hx-%"); err != nil || rows > 0 {
		out.fail("bad input reached the flow log: %d rows (err %v)", rows, err)
	}
	if err := d.db.DB().GetContext(ctx, &rows, `SELECT COUNT(*) FROM promotion WHERE promo_id LIKE ?`, d.run+"-hxp%"); err != nil || rows > 0 {
		out.fail("bad input created %d promotions (err %v)", rows, err)
	}
	if !ready(d.ctl.st.Grab) {
		out.fail("grab-service is not ready after the storm")
	}
}
