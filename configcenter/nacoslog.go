package configcenter

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nacos-group/nacos-sdk-go/v2/common/logger"
)

// routeSDKLog sends the SDK's errors to the service's logger, as warnings: they
// are mostly retries, and the source itself reports when the document cannot be
// read. The SDK's warnings are dropped with its info and debug lines: it warns on
// every read that no failover file exists. The SDK's logger is process-wide, and
// every new client resets it to a file logger, so it is set again after each.
func routeSDKLog(log *slog.Logger) {
	logger.SetLogger(sdkLog{log.With("component", "nacos-sdk")})
}

type sdkLog struct{ l *slog.Logger }

func (s sdkLog) Info(...interface{})                  {}
func (s sdkLog) Debug(...interface{})                 {}
func (s sdkLog) Warn(...interface{})                  {}
func (s sdkLog) Infof(string, ...interface{})         {}
func (s sdkLog) Debugf(string, ...interface{})        {}
func (s sdkLog) Warnf(string, ...interface{})         {}
func (s sdkLog) Error(args ...interface{})            { s.log(fmt.Sprint(args...)) }
func (s sdkLog) Errorf(f string, args ...interface{}) { s.log(fmt.Sprintf(f, args...)) }
func (s sdkLog) log(msg string)                       { s.l.Log(context.Background(), slog.LevelWarn, msg) }
