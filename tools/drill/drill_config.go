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
	c := &configRun{ctx: ctx, d: d, rd: rd, out: out, path: path, orig: orig, base: base, target: rd.other[0]}
	c.degrade()
	c.block()
	c.ban()
	c.methodLimits()
	c.grabSwitch()
	c.moveShard()
	c.malformed()
}

// configRun is one run of the config drill: the switches file, what it held before
// (orig, and base decoded), and the promotion the probes grab.
type configRun struct {
	ctx    context.Context
	d      *drillEnv
	rd     *round
	out    *outcome
	path   string
	orig   []byte
	base   configcenter.Switches
	target sale
}

// write puts s in the switches file (a fault) and returns when.
func (c *configRun) write(what string, s configcenter.Switches) time.Time {
	if err := writeSwitches(c.path, encodeSwitches(s)); err != nil {
		c.out.fail("%s: write the switches file: %v", what, err)
	}
	c.out.faults++
	c.d.logf("config: %s", what)
	return time.Now()
}

// wait probes the target until match(reply) and checks the switch applied in time.
// A breach is a probe sent more than applyWithin after the change that still saw
// the old behaviour: how long a probe then takes to answer is the machine's.
func (c *configRun) wait(what string, since time.Time, match func(reply) bool) time.Time {
	var missed time.Duration // when the last probe that saw the old behaviour was sent
	for time.Since(since) < 5*time.Second && c.ctx.Err() == nil {
		sent := time.Since(since)
		if r := c.d.load.probe(c.rd, c.target); match(r) {
			if missed > applyWithin {
				c.out.fail("%s: a probe sent %s after the change still saw the old behaviour (contract: within 1 s)", what, missed.Round(time.Millisecond))
			} else {
				c.out.note("%s applied in %s", what, sent.Round(time.Millisecond))
			}
			return time.Now()
		}
		missed = sent
		sleep(c.ctx, 20*time.Millisecond)
	}
	c.out.fail("%s: not applied within 5 s", what)
	return time.Now()
}

// degrade switches kafkaDegrade on and off.
func (c *configRun) degrade() {
	s := c.base
	s.KafkaDegrade, s.DegradeRateFactor = true, 0.5
	c.write("kafkaDegrade on, rate factor 0.5", s)
	sleep(c.ctx, 2*time.Second)
	c.write("kafkaDegrade off", c.base)
	sleep(c.ctx, time.Second)
}

// block blocks the target promotion, then unblocks it: nothing of it is granted
// meanwhile.
func (c *configRun) block() {
	target := c.target
	s := c.base
	s.BlockedPromotions = append(append([]string(nil), c.base.BlockedPromotions...), fmt.Sprintf("%s_%d", target.PromoID, target.Type))
	t := c.write("block "+target.Key(), s)
	applied := c.wait("block", t, func(r reply) bool { return r.result == "STOPPED" })
	sleep(c.ctx, 2*time.Second)
	unblocking := c.write("unblock "+target.Key(), c.base)
	c.wait("unblock", unblocking, func(r reply) bool { return r.result != "STOPPED" && r.status != 0 })
	for _, r := range c.d.load.requests() {
		if r.Grab != "GRANTED" || !r.Sent.After(applied) || !r.Done.Before(unblocking) {
			continue
		}
		for _, it := range r.Items {
			if it.Key() == target.Key() {
				c.out.fail("%s granted %s while it was blocked", r.RequestID, target.Key())
			}
		}
	}
}

// ban bans bots by pin and by address range, and lets them go: the probes
// (10.97.x.x) and the load's 10.2.x.x buyers by range, 100 of the load's pins by name.
func (c *configRun) ban() {
	s := c.base
	s.BlockedIPs = []string{"10.97.0.0/16", "10.2.0.0/16"}
	bannedPins := map[string]bool{}
	for u := range 100 {
		pin := fmt.Sprintf("%s-%s-u%d", c.d.run, c.rd.name, u)
		bannedPins[pin] = true
		s.BlockedPins = append(s.BlockedPins, pin)
	}
	t := c.write("ban 100 pins and 10.97.0.0/16, 10.2.0.0/16", s)
	banned := c.wait("ban", t, func(r reply) bool { return r.result == "BLOCKED" })
	sleep(c.ctx, 2*time.Second)
	lifting := c.write("lift the bans", c.base)
	c.wait("bans lifted", lifting, func(r reply) bool { return r.result != "BLOCKED" && r.status != 0 })
	blockedAnswers := 0
	for _, r := range c.d.load.requests() {
		if !r.Sent.After(banned) || !r.Done.Before(lifting) {
			continue
		}
		switch {
		case r.Grab == "BLOCKED":
			blockedAnswers++
		case r.Grab == "GRANTED" && (bannedPins[r.Pin] || strings.HasPrefix(r.IP, "10.2.") || strings.HasPrefix(r.IP, "10.97.")):
			c.out.fail("%s by %s from %s granted while banned", r.RequestID, r.Pin, r.IP)
		}
	}
	c.out.note("%d grabs answered BLOCKED while the bans held", blockedAnswers)
}

// methodLimits changes the method limits, and back.
func (c *configRun) methodLimits() {
	s := c.base
	s.MethodLimits = configcenter.MethodLimits{Grab: 20, Cancel: 5}
	t := c.write("methodLimits grab 20/s, cancel 5/s", s)
	c.wait("method limits", t, func(r reply) bool {
		return r.status == http.StatusTooManyRequests && strings.Contains(r.message, "method rate limit")
	})
	sleep(c.ctx, 2*time.Second)
	t = c.write("methodLimits off", c.base)
	c.wait("method limits off", t, func(r reply) bool { return r.status != http.StatusTooManyRequests && r.status != 0 })
}

// grabSwitch switches grabs off, and on.
func (c *configRun) grabSwitch() {
	s := c.base
	s.GrabEnabled = false
	t := c.write("grabEnabled off", s)
	c.wait("grabs off", t, func(r reply) bool { return r.result == "DEGRADED" })
	sleep(c.ctx, time.Second)
	t = c.write("grabEnabled on", c.base)
	c.wait("grabs on", t, func(r reply) bool { return r.result != "DEGRADED" && r.status != 0 })
}

// moveShard moves the target's shard to another name of its own server (the replica
// drill moves one to a promoted replica): grab-service follows within a second,
// rereads the server's markers, and sells on; then back to its flags' address.
func (c *configRun) moveShard() {
	shard := ring.Default.Shard(c.target.Key())
	_, port, _ := net.SplitHostPort(c.d.ctl.st.Redis[shard])
	alias := net.JoinHostPort("localhost", port)
	for _, to := range []string{alias, ""} {
		s := c.base
		if to != "" {
			s.ShardAddrs = map[string]string{strconv.Itoa(shard): to}
		}
		what := fmt.Sprintf("shard %d to %s", shard, cmp.Or(to, "its flags' address"))
		t := c.write(what, s)
		c.awaitShardAddr(what, t, shard, to)
		if took := time.Since(t); took > applyWithin {
			c.out.fail("%s: followed after %s (contract: within 1 s)", what, took.Round(time.Millisecond))
		} else {
			c.out.note("%s followed in %s", what, took.Round(time.Millisecond))
		}
		c.wait(what+", selling", time.Now(), func(r reply) bool { return r.status != 0 && r.status != http.StatusServiceUnavailable })
		sleep(c.ctx, time.Second)
	}
}

// awaitShardAddr asks grab-service's /readyz until it shows shard at to (for up to 5 s).
func (c *configRun) awaitShardAddr(what string, t time.Time, shard int, to string) {
	for addr, err := shardAddrOf(c.d.ctl.st.Ops.Grab, shard); addr != to || err != nil; addr, err = shardAddrOf(c.d.ctl.st.Ops.Grab, shard) {
		if time.Since(t) > 5*time.Second || c.ctx.Err() != nil {
			c.out.fail("%s: grab-service's /readyz still shows %q after 5 s (err %v)", what, addr, err)
			return
		}
		sleep(c.ctx, 20*time.Millisecond)
	}
}

// malformed writes malformed documents: each is rejected whole, the last good one stays.
func (c *configRun) malformed() {
	for i, bad := range []string{`{"grabEnabled": false, "bogus": 1}`, `{"grabEnabled": false`, `{"grabEnabled": false, "degradeRateFactor": 7}`} {
		if err := writeSwitches(c.path, []byte(bad)); err != nil {
			c.out.fail("write a malformed document: %v", err)
		}
		c.out.faults++
		sleep(c.ctx, 700*time.Millisecond)
		for k := 0; k < 5; k++ {
			if r := c.d.load.probe(c.rd, c.target); r.result == "DEGRADED" {
				c.out.fail("malformed document #%d was applied: grabs answer DEGRADED", i)
				break
			}
		}
	}
	if err := writeSwitches(c.path, c.orig); err != nil {
		c.out.fail("restore the switches file: %v", err)
	}
	sleep(c.ctx, 500*time.Millisecond)
}
