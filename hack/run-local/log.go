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
	var enc zap.Opts
	switch format {
	case "console":
		enc = zap.ConsoleEncoder(func(c *zapcore.EncoderConfig) {
			c.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
			c.EncodeLevel = zapcore.CapitalLevelEncoder
		})
	case "json":
		enc = zap.JSONEncoder()
	default:
		return logr.Logger{}, fmt.Errorf("-log-format: %q is neither console nor json", format)
	}
	return zap.New(zap.WriteTo(w), enc, zap.UseDevMode(false)), nil
}
