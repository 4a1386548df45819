package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/ring"
)

// applyWithin is the contract's bound on a switch change reaching an instance.
const applyWithin = time.Second

// configDrill flips the on-call switches mid-load and checks each applies within
// applyWithin.
func configDrill(ctx context.Context, d *drillEnv, rd *round, out *outcome) {
	path := d.ctl.st.SwitchesFile
	orig, base, ok := readSwitches(path, out)
	if !ok {
		return
	}
	defer func() {
		if err := writeSwitches(path, orig); err != nil {
			out.fail("restore the switches file: %v", err)
		}
	}()
	write := func(what string, s configcenter.Switches) time.Time {
		if err := writeSwitches(path, encodeSwitches(s)); err != nil {
			out.fail("%s: write the switches file: %v", what, err)
		}
		out.faults++
		d.logf("config: %s", what)
		return time.Now()
	}
	target := rd.other[0]
	// wait probes target until match(reply) and checks the switch applied in time.
	// A breach is a probe sent more than applyWithin after the change that still saw
	// the old behaviour: how long a probe then takes to answer is the machine's.
	wait := func(what string, since time.Time, match func(reply) bool) time.Time {
		var missed time.Duration // when the last probe that saw the old behaviour was sent
		for time.Since(since) < 5*time.Second && ctx.Err() == nil {
			sent := time.Since(since)
			if r := d.load.probe(rd, target); match(r) {
				if missed > applyWithin {
					out.fail("%s: a probe sent %s after the change still saw the old behaviour (contract: within 1 s)", what, missed.Round(time.Millisecond))
				} else {
					out.note("%s applied in %s", what, sent.Round(time.Millisecond))
				}
				return time.Now()
			}
			missed = sent
			sleep(ctx, 20*time.Millisecond)
		}
		out.fail("%s: not applied within 5 s", what)
		return time.Now()
	}

	// Degrade on and off.
	s := base
	s.KafkaDegrade, s.DegradeRateFactor = true, 0.5
	write("kafkaDegrade on, rate factor 0.5", s)
	sleep(ctx, 2*time.Second)
	write("kafkaDegrade off", base)
	sleep(ctx, time.Second)

	// A promotion blocked, then unblocked.
	s = base
	s.BlockedPromotions = append(append([]string(nil), base.BlockedPromotions...), fmt.Sprintf("%s_%d", target.PromoID, target.Type))
	t := write("block "+target.Key(), s)
	applied := wait("block", t, func(r reply) bool { return r.result == "STOPPED" })
	sleep(ctx, 2*time.Second)
	unblocking := write("unblock "+target.Key(), base)
	wait("unblock", unblocking, func(r reply) bool { return r.result != "STOPPED" && r.status != 0 })
	for _, r := range d.load.requests() {
		if r.Grab != "GRANTED" || !r.Sent.After(applied) || !r.Done.Before(unblocking) {
			continue
		}
		for _, it := range r.Items {
			if it.Key() == target.Key() {
				out.fail("%s granted %s while it was blocked", r.RequestID, target.Key())
			}
		}
	}

	// Bots banned by pin and by address range, and let go: the probes (10.97.x.x)
	// and the load's 10.2.x.x buyers by range, 100 of the load's pins by name.
	s = base
	s.BlockedIPs = []string{"10.97.0.0/16", "10.2.0.0/16"}
	bannedPins := map[string]bool{}
	for u := range 100 {
		pin := fmt.Sprintf("%s-%s-u%d", d.run, rd.name, u)
		bannedPins[pin] = true
		s.BlockedPins = append(s.BlockedPins, pin)
	}
	t = write("ban 100 pins and 10.97.0.0/16, 10.2.0.0/16", s)
	banned := wait("ban", t, func(r reply) bool { return r.result == "BLOCKED" })
	sleep(ctx, 2*time.Second)
	lifting := write("lift the bans", base)
	wait("bans lifted", lifting, func(r reply) bool { return r.result != "BLOCKED" && r.status != 0 })
	blockedAnswers := 0
	for _, r := range d.load.requests() {
		if !r.Sent.After(banned) || !r.Done.Before(lifting) {
			continue
		}
		switch {
		case r.Grab == "BLOCKED":
			blockedAnswers++
		case r.Grab == "GRANTED" && (bannedPins[r.Pin] || strings.HasPrefix(r.IP, "10.2.") || strings.HasPrefix(r.IP, "10.97.")):
			out.fail("%s by %s from %s granted while banned", r.RequestID, r.Pin, r.IP)
		}
	}
	out.note("%d grabs answered BLOCKED while the bans held", blockedAnswers)

	// Method limits changed, and back.
	s = base
	s.MethodLimits = configcenter.MethodLimits{Grab: 20, Cancel: 5}
	t = write("methodLimits grab 20/s, cancel 5/s", s)
	wait("method limits", t, func(r reply) bool {
		return r.status == http.StatusTooManyRequests && strings.Contains(r.message, "method rate limit")
	})
	sleep(ctx, 2*time.Second)
	t = write("methodLimits off", base)
	wait("method limits off", t, func(r reply) bool { return r.status != http.StatusTooManyRequests && r.status != 0 })

	// Grabs switched off, and on.
	s = base
	s.GrabEnabled = false
	t = write("grabEnabled off", s)
	wait("grabs off", t, func(r reply) bool { return r.result == "DEGRADED" })
	sleep(ctx, time.Second)
	t = write("grabEnabled on", base)
	wait("grabs on", t, func(r reply) bool { return r.result != "DEGRADED" && r.status != 0 })

	// The target's shard moved to another name of its own server (the replica drill
	// moves one to a promoted replica): grab-service follows within a second,
	// rereads the server's markers, and sells on; then back to its flags' address.
	shard := ring.Default.Shard(target.Key())
	_, port, _ := net.SplitHostPort(d.ctl.st.Redis[shard])
	alias := net.JoinHostPort("localhost", port)
	for _, to := range []string{alias, ""} {
		s = base
		if to != "" {
			s.ShardAddrs = map[string]string{strconv.Itoa(shard): to}
		}
		what := fmt.Sprintf("shard %d to %s", shard, cmp.Or(to, "its flags' address"))
		t = write(what, s)
		for addr, err := shardAddrOf(d.ctl.st.Grab, shard); addr != to || err != nil; addr, err = shardAddrOf(d.ctl.st.Grab, shard) {
			if time.Since(t) > 5*time.Second || ctx.Err() != nil {
				out.fail("%s: grab-service's /readyz still shows %q after 5 s (err %v)", what, addr, err)
				break
			}
			sleep(ctx, 20*time.Millisecond)
		}
		if took := time.Since(t); took > applyWithin {
			out.fail("%s: followed after %s (contract: within 1 s)", what, took.Round(time.Millisecond))
		} else {
			out.note("%s followed in %s", what, took.Round(time.Millisecond))
		}
		wait(what+", selling", time.Now(), func(r reply) bool { return r.status != 0 && r.status != http.StatusServiceUnavailable })
		sleep(ctx, time.Second)
	}

	// A malformed document is rejected whole; the last good one stays.
	for i, bad := range []string{`{"grabEnabled": false, "bogus": 1}`, `{"grabEnabled": false`, `{"grabEnabled": false, "degradeRateFactor": 7}`} {
		if err := writeSwitches(path, []byte(bad)); err != nil {
			out.fail("write a malformed document: %v", err)
		}
		out.faults++
		sleep(ctx, 700*time.Millisecond)
		for k := 0; k < 5; k++ {
			if r := d.load.probe(rd, target); r.result == "DEGRADED" {
				out.fail("malformed document #%d was applied: grabs answer DEGRADED", i)
				break
			}
		}
	}
	if err := writeSwitches(path, orig); err != nil {
		out.fail("restore the switches file: %v", err)
	}
	sleep(ctx, 500*time.Millisecond)
}
