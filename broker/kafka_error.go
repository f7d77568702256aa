package broker

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// kafkaError is a Kafka error code with a message for the client. Handlers
// turn it into the per-partition or per-resource code with errorCode.
type kafkaError struct {
	err *kerr.Error
	msg string
}

func (e *kafkaError) Error() string { return e.err.Message + ": " + e.msg }

// Unwrap gives the Kafka error, so that packages without access to
// kafkaError (the group coordinator) can tell a retriable one.
func (e *kafkaError) Unwrap() error { return e.err }

func newKafkaError(err *kerr.Error, format string, args ...any) *kafkaError {
	return &kafkaError{err: err, msg: fmt.Sprintf(format, args...)}
}

// errorCode maps an error from a topic operation to a Kafka error code and
// message.
func errorCode(err error) (int16, string) {
	if err == nil {
		return 0, ""
	}
	var te *kafkaError
	if errors.As(err, &te) {
		return te.err.Code, te.msg
	}
	return kerr.UnknownServerError.Code, err.Error()
}
