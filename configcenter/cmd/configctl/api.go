package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/flashsale/platform/configcenter"
)

// OnCallTokenEnv holds on-call's promo-admin token (name:token as promo-admin's
// FLASHSALE_ONCALL_TOKEN lists it, or the token alone).
const OnCallTokenEnv = "FLASHSALE_ONCALL_TOKEN"

// maxAnswer bounds what configctl reads of one promo-admin answer.
const maxAnswer = 4 << 20

// admin is promo-admin's switch routes: PUT /v1/switches, where every change is
// validated, published and recorded under the token's name, and its history.
type admin struct {
	base   string
	token  string
	client *http.Client
}

func newAdmin(base, token string, timeout time.Duration) (*admin, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError(fmt.Sprintf("--api %q: want promo-admin's base URL, such as http://127.0.0.1:8081", base))
	}
	if token == "" {
		return nil, fmt.Errorf("--api needs on-call's token in %s", OnCallTokenEnv)
	}
	if strings.Contains(token, ",") { // promo-admin's variable may list several: configctl sends one
		return nil, fmt.Errorf("%s holds a list; set it to your one token (or name:token)", OnCallTokenEnv)
	}
	if _, t, ok := strings.Cut(token, ":"); ok && t != "" {
		token = t // the name:token form of promo-admin's variable
	}
	return &admin{base: strings.TrimRight(base, "/"), token: token, client: &http.Client{Timeout: timeout}}, nil
}

// putResult is PUT /v1/switches' answer.
type putResult struct {
	MD5     string `json:"md5"`
	Changed bool   `json:"changed"`
	Entry   *struct {
		ID    int64 `json:"id"`
		Actor struct {
			Name string `json:"name"`
		} `json:"actor"`
		Outcome string `json:"outcome"`
	} `json:"entry"`
}

// put publishes doc over version ifMD5 through promo-admin.
func (a *admin) put(ctx context.Context, doc []byte, ifMD5, reason string) (putResult, error) {
	body, err := json.Marshal(struct {
		Document json.RawMessage `json:"document"`
		IfMD5    string          `json:"ifMd5"`
		Reason   string          `json:"reason,omitempty"`
	}{json.RawMessage(doc), ifMD5, reason})
	if err != nil {
		return putResult{}, fmt.Errorf("encode the change: %w", err)
	}
	var out putResult
	err = a.do(ctx, http.MethodPut, "/v1/switches", body, &out)
	return out, err
}

// historyEntry is one entry of GET /v1/switches/history.
type historyEntry struct {
	ID    int64     `json:"id"`
	At    time.Time `json:"at"`
	Actor struct {
		Name string `json:"name"`
	} `json:"actor"`
	Via       string                `json:"via"`
	Outcome   string                `json:"outcome"`
	Reason    string                `json:"reason"`
	BeforeMD5 string                `json:"beforeMd5"`
	AfterMD5  string                `json:"afterMd5"`
	Changes   []configcenter.Change `json:"changes"`
}

// history reads the newest limit entries, newest first.
func (a *admin) history(ctx context.Context, limit int) ([]historyEntry, error) {
	var page struct {
		Entries []historyEntry `json:"entries"`
	}
	err := a.do(ctx, http.MethodGet, fmt.Sprintf("/v1/switches/history?limit=%d", limit), nil, &page)
	return page.Entries, err
}

// apiError is promo-admin's Error body.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

func (e *apiError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("promo-admin: %d %s: %s: %s", e.Status, e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("promo-admin: %d %s: %s", e.Status, e.Code, e.Message)
}

// Is makes a SWITCHES_CHANGED refusal configcenter.ErrConflict (exit 3).
func (e *apiError) Is(target error) bool {
	return target == configcenter.ErrConflict && e.Code == "SWITCHES_CHANGED"
}

func (a *admin) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return fmt.Errorf("promo-admin %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("promo-admin %s %s: %w (if promo-admin is down and the change cannot wait: --break-glass REASON, see the runbook)", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("promo-admin %s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(b, e) != nil || e.Code == "" {
			e.Code, e.Message = "HTTP", strings.TrimSpace(string(b))
		}
		return e
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("promo-admin %s %s: the answer is not JSON: %w", method, path, err)
	}
	return nil
}

// errNoWritePath refuses a change that names neither way to write.
var errNoWritePath = usageError("a change goes through promo-admin: give --api URL (and on-call's token in " + OnCallTokenEnv +
	"), or, only when promo-admin cannot take it, --break-glass REASON to write the store directly")
