package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/flashsale/platform/tools/checker"
)

// probe sends one grab of sale s now, once, and records it like any load request
// (a transport error or an unclear 5xx is retried to a definite answer first).
func (l *load) probe(rd *round, s sale) reply {
	req := &checker.Request{
		RequestID: fmt.Sprintf("%s-%d", l.run, l.seq.Add(1)),
		Pin:       fmt.Sprintf("%s-probe-%d", l.run, rand.IntN(1000000)),
		IP:        fmt.Sprintf("10.97.%d.%d", rand.IntN(250), 1+rand.IntN(250)),
		Items:     []checker.Item{{PromoID: s.PromoID, Type: s.Type, Num: 1}},
		Grab:      checker.Unknown,
		Sent:      time.Now(),
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, req)
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), l.budget)
	ans, err := l.once.Grab(ctx, grabRequest(req, false))
	cancel()
	r := replyOf(ans, err)
	last, _ := final(ans, err)
	if last.result == checker.Unknown {
		last, _ = l.grab(req, true)
	}
	l.mu.Lock()
	req.Grab, req.Done = last.result, time.Now()
	keepAmounts(req, last)
	l.mu.Unlock()
	return r
}

// track adds a request a drill sends by itself to those the checker accounts for;
// update changes it under the load's lock.
func (l *load) track(req *checker.Request) {
	l.mu.Lock()
	l.reqs = append(l.reqs, req)
	l.mu.Unlock()
}

func (l *load) update(req *checker.Request, change func(*checker.Request)) {
	l.mu.Lock()
	change(req)
	l.mu.Unlock()
}

// legit makes one ordinary grab of one unit of s for pin (and cancels it when
// cancel is set), recorded like any load request.
func (l *load) legit(s sale, pin, ip string, cancel bool) *checker.Request {
	req := &checker.Request{
		RequestID: fmt.Sprintf("%s-%d", l.run, l.seq.Add(1)),
		Pin:       pin, IP: ip,
		Items: []checker.Item{{PromoID: s.PromoID, Type: s.Type, Num: 1}},
		Grab:  checker.Unknown,
		Sent:  time.Now(),
	}
	l.mu.Lock()
	l.reqs = append(l.reqs, req)
	l.mu.Unlock()
	answer, _ := l.grab(req, false)
	l.mu.Lock()
	req.Grab, req.Done = answer.result, time.Now()
	keepAmounts(req, answer)
	l.mu.Unlock()
	if cancel && answer.result == "GRANTED" {
		l.mu.Lock()
		req.Cancel = checker.Unknown
		l.mu.Unlock()
		cf, _ := l.cancelGrab(req, "")
		l.mu.Lock()
		req.Cancel, req.Done = cf.result, time.Now()
		keepAmounts(req, cf)
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := *req
	return &c
}
