package tiering

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// How the S3 store tells failures apart: the package's error kinds for
// callers (mapErr), a short code per failure for StoreError and the
// metrics (failureCode), and the count of every failed request, the
// SDK's retried attempts included (errorCounts).

// errRequestTimeout is the cause of a request context the store cancels
// when RequestTimeout passes (a GET until its answer starts).
var errRequestTimeout = errors.New("tiering: s3 request timed out")

// errTruncatedBody: a GET's body ended before the length its headers
// promised, or its range is not the one asked for.
var errTruncatedBody = errors.New("tiering: s3 response body truncated")

// maxRetryAfter bounds what the store may ask a client to wait.
const maxRetryAfter = 10 * time.Minute

// knownS3Codes are the S3 error codes reported as themselves; any other
// code is reported as http_<status>, so a store cannot grow the metrics'
// label values without bound.
var knownS3Codes = map[string]bool{
	"SlowDown": true, "ServiceUnavailable": true, "InternalError": true, "RequestTimeout": true,
	"XMinioServerNotInitialized": true, "RequestLimitExceeded": true, "Throttling": true, "TooManyRequestsException": true,
	"AccessDenied": true, "InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "ExpiredToken": true,
	"InvalidToken": true, "RequestTimeTooSkewed": true, "NoSuchBucket": true, "NoSuchKey": true, "NotFound": true,
	"NoSuchUpload": true, "PreconditionFailed": true, "ConditionalRequestConflict": true, "InvalidRange": true,
	"InvalidPart": true, "InvalidPartOrder": true, "EntityTooSmall": true, "BadDigest": true, "IncompleteBody": true,
	"InvalidArgument": true, "InvalidRequest": true, "MalformedXML": true,
}

// throttleCodes are the codes of a store asking its clients to slow down.
var throttleCodes = map[string]bool{
	"SlowDown": true, "ServiceUnavailable": true, "RequestLimitExceeded": true, "Throttling": true,
	"ThrottlingException": true, "TooManyRequestsException": true, "RequestThrottled": true,
}

// answerCodes are answers that report an outcome, not a failure: they are
// not counted as store errors.
var answerCodes = map[string]bool{
	"NoSuchKey": true, "NotFound": true, "PreconditionFailed": true, "ConditionalRequestConflict": true,
	"InvalidRange": true, "http_404": true, "http_412": true, "http_416": true, "canceled": true,
}

// httpStatus is the status of the answer err carries, 0 when none came.
func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return re.HTTPStatusCode()
	}
	return 0
}

// failureCode names err for StoreError.Code and the metrics. ctx is the
// request's context: a cancellation the store caused (errRequestTimeout)
// is a timeout, one the caller caused is "canceled".
func failureCode(ctx context.Context, err error) string {
	status := httpStatus(err)
	var ae smithy.APIError
	if errors.As(err, &ae) && knownS3Codes[ae.ErrorCode()] {
		return ae.ErrorCode()
	}
	if status > 0 {
		return "http_" + strconv.Itoa(status)
	}
	var ne net.Error
	switch {
	case errors.Is(err, errTruncatedBody):
		return "truncated"
	case errors.Is(err, errRequestTimeout) || (ctx != nil && context.Cause(ctx) == errRequestTimeout):
		return "timeout"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || strings.Contains(err.Error(), "connection reset") ||
		errors.Is(err, net.ErrClosed): // the client's side of a connection the peer reset

		return "reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "server closed"):
		return "closed"
	}
	return "other"
}

// retryAfterOf is how long the store's answer asked to wait:
// x-amz-retry-after (milliseconds) or Retry-After (seconds or a date),
// the longer, at most maxRetryAfter.
func retryAfterOf(err error) time.Duration {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return 0
	}
	h := re.Response.Header
	var d time.Duration
	if v := h.Get("X-Amz-Retry-After"); v != "" {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
			d = time.Duration(min(ms, maxRetryAfter.Milliseconds())) * time.Millisecond
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 {
			d = max(d, time.Duration(min(s, int64(maxRetryAfter/time.Second)))*time.Second)
		} else if t, err := http.ParseTime(v); err == nil {
			d = max(d, time.Until(t))
		}
	}
	return min(d, maxRetryAfter)
}

// mapPutErr is mapErr for a put: S3 answers If-Match on a missing object
// with 404, which for the caller is a failed precondition.
func (s *S3Store) mapPutErr(ctx context.Context, key string, cond PutCondition, err error) error {
	err = s.mapErr(ctx, "put", key, err)
	if cond.IfMatch != "" && IsNotFound(err) {
		return fmt.Errorf("%w: %w", ErrPreconditionFailed, err)
	}
	return err
}

// isInvalidRange reports a 416 answer to a ranged GET.
func isInvalidRange(err error) bool {
	if httpStatus(err) == http.StatusRequestedRangeNotSatisfiable {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange"
}

// mapErr turns an SDK error of operation op (put, get, head, list,
// delete) into the package's errors, as a *StoreError. ctx is the
// context the request ran under: when it is done, a timeout is
// ErrUnavailable and a cancellation by the caller is returned as such.
func (s *S3Store) mapErr(ctx context.Context, op, key string, err error) error {
	code := failureCode(ctx, err)
	if errors.Is(err, context.Canceled) && ctx.Err() == context.Canceled && context.Cause(ctx) != errRequestTimeout {
		return fmt.Errorf("tiering: %s %s: %w", op, key, err)
	}
	status := httpStatus(err)
	apiCode := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		apiCode = ae.ErrorCode()
	}
	wrap := func(kinds ...error) error {
		var wrapped error
		if len(kinds) == 0 {
			wrapped = fmt.Errorf("tiering: s3 %s %s: %w", op, key, err)
		} else {
			args := make([]any, 0, len(kinds)+3)
			format := ""
			for _, k := range kinds {
				format += "%w: "
				args = append(args, k)
			}
			wrapped = fmt.Errorf(format+"s3 %s %s: %w", append(args, op, key, err)...)
		}
		return &StoreError{Op: op, Code: code, RetryAfter: retryAfterOf(err), Err: wrapped}
	}
	switch {
	case apiCode == "PreconditionFailed" || status == http.StatusPreconditionFailed ||
		apiCode == "ConditionalRequestConflict":
		return wrap(ErrPreconditionFailed)
	case apiCode == "NoSuchBucket":
		return wrap(ErrUnavailable, ErrBucketNotFound)
	case apiCode == "NoSuchUpload":
		// A multipart upload that is gone: completed by an attempt
		// whose answer was lost, or aborted. The object's state is
		// unknown; the caller uploads again.
		return wrap(ErrUnavailable)
	case apiCode == "NoSuchKey" || apiCode == "NotFound" || status == http.StatusNotFound:
		return wrap(ErrNotFound)
	case apiCode == "InvalidAccessKeyId" || apiCode == "SignatureDoesNotMatch" || apiCode == "AccessDenied" ||
		apiCode == "ExpiredToken" || apiCode == "InvalidToken" || status == http.StatusForbidden:
		return wrap(ErrUnavailable, ErrAccessDenied)
	case throttleCodes[apiCode] || status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		return wrap(ErrUnavailable, ErrThrottled)
	case status >= 500 || apiCode == "RequestTimeout" || apiCode == "InternalError" || apiCode == "XMinioServerNotInitialized":
		return wrap(ErrUnavailable)
	case status == 0 && isNoCredentials(err):
		return wrap(ErrUnavailable, ErrNoCredentials)
	case status == 0:
		var pe smithy.InvalidParamsError
		if errors.As(err, &pe) {
			return wrap()
		}
		// No answer at all: refused, reset, timed out, DNS.
		return wrap(ErrUnavailable)
	}
	return wrap()
}

// isNoCredentials reports the SDK failing to find credentials.
func isNoCredentials(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "failed to retrieve credentials") ||
		strings.Contains(msg, "failed to refresh cached credentials") ||
		strings.Contains(msg, "no EC2 IMDS role found") ||
		strings.Contains(msg, "static credentials are empty")
}

// errorCounts counts failed requests by operation and code.
type errorCounts struct {
	m sync.Map // StoreErrorCount with Count 0 -> *atomic.Int64
}

// observe counts one failed request of op, unless it was an answer
// rather than a failure.
func (c *errorCounts) observe(ctx context.Context, op string, err error) {
	c.add(op, failureCode(ctx, err))
}

func (c *errorCounts) add(op, code string) {
	if answerCodes[code] {
		return
	}
	k := StoreErrorCount{Op: op, Code: code}
	v, ok := c.m.Load(k)
	if !ok {
		v, _ = c.m.LoadOrStore(k, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// snapshot returns the counts, sorted by operation and code.
func (c *errorCounts) snapshot() []StoreErrorCount {
	var out []StoreErrorCount
	c.m.Range(func(k, v any) bool {
		e := k.(StoreErrorCount)
		e.Count = v.(*atomic.Int64).Load()
		out = append(out, e)
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Op != out[j].Op {
			return out[i].Op < out[j].Op
		}
		return out[i].Code < out[j].Code
	})
	return out
}

// opLabel is the metrics operation of an S3 API operation.
func opLabel(apiOp string) string {
	switch apiOp {
	case "PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload":
		return "put"
	case "GetObject":
		return "get"
	case "HeadObject":
		return "head"
	case "ListObjectsV2":
		return "list"
	case "DeleteObject", "AbortMultipartUpload":
		return "delete"
	}
	return "other"
}

// countAttempts adds to the client's stack a middleware, inside the SDK's
// retry loop, that counts every failed attempt (and tells an upload's
// stallGuard that attempts start and end).
func (c *errorCounts) countAttempts(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("StrataCountStoreErrors",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			touchStallGuard(ctx) // an attempt starting is progress
			out, md, err := next.HandleFinalize(ctx, in)
			touchStallGuard(ctx)
			if err != nil {
				c.observe(ctx, opLabel(awsmiddleware.GetOperationName(ctx)), err)
			}
			return out, md, err
		}), middleware.After)
}
