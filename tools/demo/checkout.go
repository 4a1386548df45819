package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/flashsale/platform/client"
	"github.com/flashsale/platform/internal/stack"
	"github.com/flashsale/platform/tools/checker"
	"github.com/flashsale/platform/tools/loadgen"
)

// platform is how the demo talks to the stack, as its users do: the checkout
// service's client of grab-service (every buyer's grab and cancel) and the
// merchandisers' client of promo-admin (client/).
type platform struct {
	grab  *client.Client
	admin *client.Admin
}

// pressTimeout bounds one buyer's grab, its retries included.
const pressTimeout = 10 * time.Second

func newPlatform(st stack.File, hc *http.Client, checkoutToken, adminToken string) (platform, error) {
	g, err := client.New(client.Config{BaseURL: st.Grab, Token: checkoutToken, HTTPClient: hc, UserAgent: "flashsale-demo"})
	if err != nil {
		return platform{}, err
	}
	a, err := client.NewAdmin(client.Config{BaseURL: st.Admin, Token: adminToken, HTTPClient: hc, UserAgent: "flashsale-demo"})
	if err != nil {
		return platform{}, err
	}
	return platform{grab: g, admin: a}, nil
}

// told is what one buyer was told: the result as the checker reads it, and the
// client's answer when the call succeeded.
type told struct {
	result string
	answer *client.Answer
}

// amount is the envelope amount the answer's one item carried (0 when none).
func (t told) amount() int64 {
	if t.answer == nil || len(t.answer.Items) == 0 || t.answer.Items[0].Amount == nil {
		return 0
	}
	return *t.answer.Items[0].Amount
}

// tell reads a call's outcome: its result (a refusal's result, else its code,
// else its status), or checker.Unknown when the client could not learn it.
func tell(ans *client.Answer, err error) told {
	if err == nil {
		return told{result: string(ans.Result), answer: ans}
	}
	var e *client.Error
	switch {
	case !errors.As(err, &e), e.Unknown, e.StatusCode == 0:
		return told{result: checker.Unknown}
	case e.Result != "":
		return told{result: string(e.Result)}
	case e.Code != "":
		return told{result: string(e.Code)}
	}
	return told{result: fmt.Sprintf("HTTP_%d", e.StatusCode)}
}

// crowd sends n buyers' grabs through the checkout client, concurrency at a time,
// with a progress bar under label (none when empty): loadgen's answers, for its
// summary, and what each buyer was told.
func (p platform) crowd(ctx context.Context, n, concurrency int, label string, buyer func(i int) client.GrabRequest) ([]loadgen.Answer, []told) {
	tolds := make([]told, n)
	answers := loadgen.RunTasks(ctx, loadgen.Config{Concurrency: concurrency, Calls: n, Label: label}, func(ctx context.Context, i int) loadgen.Answer {
		ctx, cancel := context.WithTimeout(ctx, pressTimeout)
		defer cancel()
		start := time.Now()
		ans, err := p.grab.Grab(ctx, buyer(i))
		tolds[i] = tell(ans, err)
		status := http.StatusOK
		var e *client.Error
		if errors.As(err, &e) {
			status = e.StatusCode
		}
		return loadgen.Answer{Status: status, Result: tolds[i].result, Latency: time.Since(start)}
	}, nil)
	return answers, tolds
}

// cancel cancels a grant whose order was not paid.
func (p platform) cancel(ctx context.Context, requestID, pin string) told {
	ctx, cancel := context.WithTimeout(ctx, pressTimeout)
	defer cancel()
	return tell(p.grab.Cancel(ctx, requestID, pin, client.ReasonPaymentExpired))
}

// create creates a promotion on sale from a second ago for an hour.
func (p platform) create(ctx context.Context, spec client.PromotionSpec) error {
	now := time.Now().UTC().Truncate(time.Second)
	spec.StartAt, spec.EndAt = now.Add(-time.Second), now.Add(time.Hour)
	if _, err := p.admin.Create(ctx, spec); err != nil {
		return fmt.Errorf("create %s: %w", spec.PromoID, err)
	}
	return nil
}
