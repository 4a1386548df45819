package nacostest

import (
	"context"
	"encoding/json"
	"time"

	pb "github.com/nacos-group/nacos-sdk-go/v2/api/grpc"
	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc/rpc_request"
	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc/rpc_response"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// Error codes a Nacos server answers with, as the SDK interprets them.
const (
	codeNotFound     = 300 // config absent: the SDK's GetConfig returns ("", nil)
	codeUnregistered = 301 // connection unknown: the SDK switches server
	codeNoHandler    = 302
	codeForbidden    = 403
	codeFail         = 500
)

// handler serves the two gRPC services a Nacos 2.x client uses.
type handler struct{ s *Server }

// Request serves the unary calls. Every reply carries the exact response type
// name the SDK expects; any other name makes the SDK drop the connection.
func (h *handler) Request(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
	quit, ok := h.s.enter()
	if !ok {
		return nil, status.Error(codes.Unavailable, "nacos test server stopping")
	}
	defer h.s.wg.Done()
	typ, body, hdr := p.GetMetadata().GetType(), p.GetBody().GetValue(), p.GetMetadata().GetHeaders()
	var base struct {
		RequestID string `json:"requestId"`
	}
	_ = json.Unmarshal(body, &base)
	id, from := base.RequestID, peerOf(ctx)

	if typ == "ServerCheckRequest" { // the only call made before the bi-stream exists
		return reply(&rpc_response.ServerCheckResponse{Response: success(id), ConnectionId: from}), nil
	}
	if !h.s.registered(from) {
		return reply(&rpc_response.ErrorResponse{Response: failure(id, codeUnregistered, "connection is not registered")}), nil
	}
	if typ == "HealthCheckRequest" {
		return reply(&rpc_response.HealthCheckResponse{Response: success(id)}), nil
	}
	if !h.s.authorized(hdr) {
		return reply(&rpc_response.ErrorResponse{Response: failure(id, codeForbidden, "access token missing or unknown")}), nil
	}
	switch typ {
	case "ConfigQueryRequest":
		return h.query(id, body)
	case "ConfigBatchListenRequest":
		return h.batchListen(ctx, quit, id, from, body)
	case "ConfigPublishRequest":
		return h.publish(id, body)
	case "ConfigRemoveRequest":
		return h.remove(id, body)
	}
	return reply(&rpc_response.ErrorResponse{Response: failure(id, codeNoHandler, "no handler for "+typ)}), nil
}

func (h *handler) query(id string, body []byte) (*pb.Payload, error) {
	r := rpc_request.ConfigQueryRequest{}
	if err := json.Unmarshal(body, &r); err != nil || r.ConfigRequest == nil {
		return badRequest(id, "ConfigQueryResponse")
	}
	h.s.queries.Add(1)
	k := Key{Tenant: r.Tenant, Group: r.Group, DataID: r.DataId}
	h.s.mu.Lock()
	it, ok := h.s.configs[k]
	h.s.mu.Unlock()
	if !ok {
		return reply(&rpc_response.ConfigQueryResponse{Response: failure(id, codeNotFound, "config data not exist")}), nil
	}
	return reply(&rpc_response.ConfigQueryResponse{Response: success(id), Content: it.content, Md5: it.md5,
		ContentType: "text", LastModified: it.modified.UnixMilli()}), nil
}

// batchListen registers the listens and answers which keys differ from the
// client's md5. The answer is computed on arrival and sent after the listen delay,
// so a change made meanwhile is pushed but not in this answer: the SDK's race.
func (h *handler) batchListen(ctx context.Context, quit <-chan struct{}, id, from string, body []byte) (*pb.Payload, error) {
	r := rpc_request.ConfigBatchListenRequest{}
	if err := json.Unmarshal(body, &r); err != nil {
		return badRequest(id, "ConfigChangeBatchListenResponse")
	}
	changed := []model.ConfigContext{}
	h.s.mu.Lock()
	keys := h.s.listens[from]
	if keys == nil {
		keys = map[Key]bool{}
		h.s.listens[from] = keys
	}
	for _, c := range r.ConfigListenContexts {
		k := Key{Tenant: c.Tenant, Group: c.Group, DataID: c.DataId}
		if r.Listen {
			keys[k] = true
		} else {
			delete(keys, k)
		}
		if h.s.configs[k].md5 != c.Md5 {
			changed = append(changed, model.ConfigContext{Group: k.Group, DataId: k.DataID, Tenant: k.Tenant})
		}
	}
	h.s.mu.Unlock()
	if len(changed) == 0 {
		h.s.upToDateListens.Add(1)
		defer h.s.upToDateListens.Add(-1)
	}
	sleep(ctx, quit, time.Duration(h.s.listenDelay.Load()))
	return reply(&rpc_response.ConfigChangeBatchListenResponse{Response: success(id), ChangedConfigs: changed}), nil
}

func (h *handler) publish(id string, body []byte) (*pb.Payload, error) {
	r := rpc_request.ConfigPublishRequest{}
	if err := json.Unmarshal(body, &r); err != nil || r.ConfigRequest == nil || r.Content == "" {
		return badRequest(id, "ConfigPublishResponse")
	}
	if err := h.s.publish(Key{Tenant: r.Tenant, Group: r.Group, DataID: r.DataId}, r.Content, r.CasMd5); err != nil {
		return reply(&rpc_response.ConfigPublishResponse{Response: failure(id, codeFail, err.Error())}), nil
	}
	return reply(&rpc_response.ConfigPublishResponse{Response: success(id)}), nil
}

func (h *handler) remove(id string, body []byte) (*pb.Payload, error) {
	r := rpc_request.ConfigRemoveRequest{}
	if err := json.Unmarshal(body, &r); err != nil || r.ConfigRequest == nil {
		return badRequest(id, "ConfigRemoveResponse")
	}
	h.s.Remove(Key{Tenant: r.Tenant, Group: r.Group, DataID: r.DataId})
	return reply(&rpc_response.ConfigRemoveResponse{Response: success(id)}), nil
}

// RequestBiStream holds a client's push channel. The client's first message is
// ConnectionSetupRequest, which registers the connection; later messages are its
// answers to our pushes (NotifySubscriberResponse), which need nothing.
func (h *handler) RequestBiStream(stream pb.BiRequestStream_RequestBiStreamServer) error {
	if _, ok := h.s.enter(); !ok {
		return status.Error(codes.Unavailable, "nacos test server stopping")
	}
	defer h.s.wg.Done()
	from := peerOf(stream.Context())
	c := &conn{stream: stream}
	defer func() {
		h.s.mu.Lock()
		if h.s.conns[from] == c {
			delete(h.s.conns, from)
			delete(h.s.listens, from)
		}
		h.s.mu.Unlock()
	}()
	for {
		p, err := stream.Recv()
		if err != nil {
			return nil // client gone or server stopping
		}
		if p.GetMetadata().GetType() == "ConnectionSetupRequest" {
			h.s.mu.Lock()
			h.s.conns[from] = c
			h.s.mu.Unlock()
		}
	}
}

func peerOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok {
		return p.Addr.String()
	}
	return ""
}

func success(id string) *rpc_response.Response {
	return &rpc_response.Response{ResultCode: 200, Success: true, RequestId: id}
}

func failure(id string, code int, msg string) *rpc_response.Response {
	return &rpc_response.Response{ResultCode: codeFail, ErrorCode: code, Message: msg, RequestId: id}
}

func badRequest(id, typ string) (*pb.Payload, error) {
	return payload(typ, &rpc_response.Response{ResultCode: codeFail, ErrorCode: 400, Message: "malformed request", RequestId: id}), nil
}

type typed interface{ GetResponseType() string }

func reply(r typed) *pb.Payload { return payload(r.GetResponseType(), r) }

func payload(typ string, body any) *pb.Payload {
	b, _ := json.Marshal(body) // the SDK's response structs always marshal
	return &pb.Payload{Metadata: &pb.Metadata{Type: typ}, Body: &anypb.Any{Value: b}}
}

func pushPayload(k Key, id string) *pb.Payload {
	r := rpc_request.NewConfigChangeNotifyRequest(k.Group, k.DataID, k.Tenant)
	r.RequestId = id
	return payload(r.GetRequestType(), r)
}
