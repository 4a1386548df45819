package svc

import (
	"context"
	"net/http"
	"time"
)

// handlerDeadline bounds the context of every request: past the server's
// WriteTimeout the answer can no longer be written, so work still waiting then (on
// a hung MySQL, say, which answers nothing and refuses nothing) only holds a
// goroutine and a connection of the pool. Every call made with the request's
// context (database/sql, go-redis, kafka-go all honour it) ends by this deadline.
const handlerDeadline = 10 * time.Second

// withDeadline gives each request's context a deadline d from its start.
func withDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
