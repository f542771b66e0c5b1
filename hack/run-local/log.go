package main

import (
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// newLogger returns the operator's logger: console lines for people
// ("15:04:05.000  INFO  managedcluster  cluster governed  {"cluster": ...}")
// or, with format "json", one JSON object a line for tools.
func newLogger(format string, w io.Writer) (logr.Logger, error) {
	opts := []zap.Opts{zap.WriteTo(w), zap.UseDevMode(false)} // JSON, as the operator logs in a cluster
	switch format {
	case "console":
		opts = append(opts, zap.ConsoleEncoder(func(c *zapcore.EncoderConfig) {
			c.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
			c.EncodeLevel = zapcore.CapitalLevelEncoder
		}))
	case "json":
	default:
		return logr.Logger{}, fmt.Errorf("-log-format: %q is neither console nor json", format)
	}
	return zap.New(opts...), nil
}
