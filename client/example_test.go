package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/flashsale/platform/client"
)

// A checkout service's grab: a requestId of its own (here derived beside the
// promotion, which saves grab-service a round trip), a deadline for the whole
// call, retries left to the client, and the answer branched on by its typed
// result. The stand-in service below grants the first grab; in production
// BaseURL is grab-service's address and Token the checkout service's token.
func Example() {
	grabService := standIn()
	defer grabService.Close()

	c, err := client.New(client.Config{BaseURL: grabService.URL, Token: "dev-checkout-token"})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	req := client.GrabRequest{
		RequestID: "order-20261111-000042", // the order's id: the same on every retry
		Pin:       "buyer-42",
		IP:        "203.0.113.7",
		Items:     []client.Item{{PromoID: "sale-1111", Type: 1, Num: 1}},
	}.WithRequestIDBeside()

	ans, err := c.Grab(ctx, req)
	var e *client.Error
	switch {
	case err == nil:
		fmt.Printf("%s %s: %d left\n", ans.Result, ans.RequestID, *ans.Items[0].Remaining)
	case errors.As(err, &e) && e.Refused():
		fmt.Println("refused:", e.Result) // SOLD_OUT, PIN_LIMIT, ...: tell the buyer
	case client.OutcomeUnknown(err):
		fmt.Println("unknown: send the same request again later (Resend: true)")
	default:
		fmt.Println("not granted:", err) // nothing was taken
	}
	// Output: GRANTED order-20261111-000042.1: 99 left
}

// standIn answers one grab GRANTED, as grab-service would.
func standIn() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"requestId":"order-20261111-000042.1","result":"GRANTED","items":[{"promoId":"sale-1111","type":1,"num":1,"remaining":99}]}`)
	}))
}

func ExampleRequestIDBeside() {
	rid := client.RequestIDBeside("order-20261111-000042", "sale-1111", 1)
	fmt.Println(rid)
	// Its request index entry, R_<requestId>, is on the promotion's shard.
	fmt.Println(client.Shard(client.PromotionKey("sale-1111", 1)), client.Shard("R_"+rid))
	// Output:
	// order-20261111-000042.1
	// 10 10
}
