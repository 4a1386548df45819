package configcenter

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nacos-group/nacos-sdk-go/v2/common/logger"
)

// routeSDKLog sends the SDK's warnings and errors to the service's logger. The
// SDK's logger is process-wide, and every new client resets it to a file logger,
// so it is set again after each client is made. Its info and debug lines (one per
// request) are dropped; its errors are mostly retries, so they arrive as warnings.
func routeSDKLog(log *slog.Logger) {
	logger.SetLogger(sdkLog{log.With("component", "nacos-sdk")})
}

type sdkLog struct{ l *slog.Logger }

func (s sdkLog) Info(args ...interface{})             {}
func (s sdkLog) Debug(args ...interface{})            {}
func (s sdkLog) Infof(_ string, _ ...interface{})     {}
func (s sdkLog) Debugf(_ string, _ ...interface{})    {}
func (s sdkLog) Warn(args ...interface{})             { s.log(fmt.Sprint(args...)) }
func (s sdkLog) Error(args ...interface{})            { s.log(fmt.Sprint(args...)) }
func (s sdkLog) Warnf(f string, args ...interface{})  { s.log(fmt.Sprintf(f, args...)) }
func (s sdkLog) Errorf(f string, args ...interface{}) { s.log(fmt.Sprintf(f, args...)) }
func (s sdkLog) log(msg string)                       { s.l.Log(context.Background(), slog.LevelWarn, msg) }
