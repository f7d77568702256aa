package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Errors of the S3 store that name a configuration problem. Each comes
// wrapped together with ErrUnavailable, since the problem may be fixed
// while the broker runs (a bucket created, a key rotated): callers retry.
var (
	ErrBucketNotFound = errors.New("tiering: bucket does not exist")
	ErrAccessDenied   = errors.New("tiering: access denied (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)")
	ErrNoCredentials  = errors.New("tiering: no AWS credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or configure the AWS credential chain)")
)

// S3 store defaults.
const (
	DefaultS3Region        = "us-east-1"
	DefaultS3PartSize      = 16 << 20
	minS3PartSize          = 5 << 20 // S3's minimum for all parts but the last
	maxS3Parts             = 10000
	defaultS3Concurrency   = 4
	defaultS3MaxAttempts   = 4
	defaultS3MaxBackoff    = 2 * time.Second
	defaultS3RequestTimout = 30 * time.Second
	defaultS3DialTimeout   = 5 * time.Second
	// s3MinThroughput stretches the bound on a put with its size: a part
	// may take RequestTimeout plus one second per 64 KiB, as long as it
	// never goes RequestTimeout without progress (stallGuard). A slow
	// link makes uploads slow, not impossible.
	s3MinThroughput = 64 << 10
)

// S3Config configures an S3Store. Only Bucket is required.
type S3Config struct {
	// Endpoint is remote.storage.s3.endpoint, e.g. "http://127.0.0.1:9000"
	// for MinIO. Empty means AWS S3.
	Endpoint string
	// Bucket is remote.storage.s3.bucket.
	Bucket string
	// Region is remote.storage.s3.region; DefaultS3Region when empty.
	Region string
	// Prefix is remote.storage.s3.prefix: every key is stored under
	// "<Prefix>/". Leading and trailing slashes are ignored.
	Prefix string
	// PathStyle is remote.storage.s3.path.style.access: bucket in the path
	// rather than the host name. Nil means true when Endpoint is set (as
	// MinIO wants) and false for AWS.
	PathStyle *bool
	// AccessKeyID and SecretAccessKey (and SessionToken), when set, are
	// used instead of the standard AWS chain (environment variables
	// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, shared config, instance
	// roles).
	AccessKeyID, SecretAccessKey, SessionToken string

	// PartSize is the size of a multipart upload's parts; an object up to
	// PartSize is one PutObject. DefaultS3PartSize when 0; at least 5 MiB.
	PartSize int64
	// Concurrency is the number of parts of one object uploaded at once.
	// 4 when 0.
	Concurrency int
	// MaxAttempts is how many times one request is tried (with
	// exponential backoff and jitter) on connection errors, timeouts,
	// throttling and 5xx answers. 4 when 0.
	MaxAttempts int
	// MaxBackoff bounds the wait between attempts. 2 s when 0.
	MaxBackoff time.Duration
	// RequestTimeout bounds each operation (a put: plus one second per
	// 64 KiB; a get: until the response starts) and each stall of a
	// connection (a put: RequestTimeout without sending a byte of its
	// body or starting an attempt). 30 s when 0.
	RequestTimeout time.Duration
	// DialTimeout bounds connecting. 5 s when 0.
	DialTimeout time.Duration
}

func (c S3Config) normalized() S3Config {
	if c.Region == "" {
		c.Region = DefaultS3Region
	}
	c.Prefix = strings.Trim(c.Prefix, "/")
	if c.PathStyle == nil {
		ps := c.Endpoint != ""
		c.PathStyle = &ps
	}
	if c.PartSize == 0 {
		c.PartSize = DefaultS3PartSize
	}
	c.PartSize = max(c.PartSize, minS3PartSize)
	if c.Concurrency <= 0 {
		c.Concurrency = defaultS3Concurrency
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = defaultS3MaxAttempts
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = defaultS3MaxBackoff
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = defaultS3RequestTimout
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = defaultS3DialTimeout
	}
	return c
}

// S3Store is an ObjectStore in an S3 bucket (AWS, MinIO, or any
// S3-compatible store), on aws-sdk-go-v2.
//
// Objects up to PartSize are one PutObject; larger ones a multipart upload
// of PartSize parts, Concurrency at a time, aborted on failure. Conditional
// puts send If-None-Match: * or If-Match: <etag>. Errors map to the
// package's: 412 (and 409 ConditionalRequestConflict) to
// ErrPreconditionFailed, 404 NoSuchKey to ErrNotFound, connection errors,
// timeouts, throttling and 5xx to ErrUnavailable (after the SDK's retries),
// a missing bucket, refused credentials or none at all to ErrUnavailable
// together with ErrBucketNotFound, ErrAccessDenied or ErrNoCredentials.
type S3Store struct {
	cfg    S3Config
	client *s3.Client
	errs   errorCounts
}

// NewS3Store builds the client. It does not contact the store: call Check
// to find out whether the bucket is reachable.
func NewS3Store(ctx context.Context, cfg S3Config) (*S3Store, error) {
	cfg = cfg.normalized()
	if cfg.Bucket == "" {
		return nil, errors.New("tiering: s3: remote.storage.s3.bucket is not set")
	}
	httpClient := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = cfg.DialTimeout }).
		WithTransportOptions(func(t *http.Transport) {
			t.ResponseHeaderTimeout = cfg.RequestTimeout
			t.MaxIdleConnsPerHost = 64
		}).
		WithReadTimeout(cfg.RequestTimeout)
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(cfg.Region),
		config.WithHTTPClient(httpClient),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = cfg.MaxAttempts
				o.MaxBackoff = cfg.MaxBackoff
				// No retry quota: an outage must not turn into a client
				// that stops retrying for a while after it ends.
				o.RateLimiter = ratelimit.None
			})
		}),
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tiering: s3: load AWS configuration: %w", err)
	}
	st := &S3Store{cfg: cfg}
	st.client = s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = *cfg.PathStyle
		o.DisableLogOutputChecksumValidationSkipped = true
		o.APIOptions = append(o.APIOptions, st.errs.countAttempts)
	})
	return st, nil
}

// StoreErrors implements ErrorCounter: the requests to the store that
// failed, the SDK's retried attempts and failed body reads included.
func (s *S3Store) StoreErrors() []StoreErrorCount { return s.errs.snapshot() }

// String describes the store for logs.
func (s *S3Store) String() string {
	where := s.cfg.Endpoint
	if where == "" {
		where = "AWS " + s.cfg.Region
	}
	return fmt.Sprintf("s3://%s/%s at %s", s.cfg.Bucket, s.cfg.Prefix, where)
}

// fullKey adds the store's prefix.
func (s *S3Store) fullKey(key string) string {
	if s.cfg.Prefix == "" {
		return key
	}
	return s.cfg.Prefix + "/" + key
}

// Check asks the store for one key of the bucket and says in plain words
// what is wrong: the endpoint unreachable, the bucket missing, the
// credentials refused or absent. It tries once, bounded by RequestTimeout.
func (s *S3Store) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	_, err := s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket:  aws.String(s.cfg.Bucket),
		Prefix:  aws.String(s.fullKey("")),
		MaxKeys: aws.Int32(1),
	}, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
	if err == nil {
		return nil
	}
	mapped := s.mapErr(ctx, "list", s.cfg.Bucket, err)
	switch {
	case errors.Is(mapped, ErrBucketNotFound):
		return fmt.Errorf("tiering: %s: bucket %q does not exist: %w", s, s.cfg.Bucket, mapped)
	case errors.Is(mapped, ErrAccessDenied):
		return fmt.Errorf("tiering: %s: credentials refused: %w", s, mapped)
	case errors.Is(mapped, ErrNoCredentials):
		return fmt.Errorf("tiering: %s: %w", s, mapped)
	case errors.Is(mapped, ErrUnavailable):
		return fmt.Errorf("tiering: %s: endpoint unreachable or failing: %w", s, mapped)
	}
	return fmt.Errorf("tiering: %s: %w", s, mapped)
}

// putTimeout bounds an upload of size bytes.
func (s *S3Store) putTimeout(size int64) time.Duration {
	return s.cfg.RequestTimeout + time.Duration(size/s3MinThroughput)*time.Second
}

// stallGuardKey is the context key of a request's stallGuard.
type stallGuardKey struct{}

// stallGuard cancels an upload's context, with errRequestTimeout, once it
// has gone RequestTimeout without progress: without the transport reading
// a byte of its body, and without an attempt starting or ending (the
// attempt middleware touches it, so the SDK's backoff between attempts
// is not a stall unless it exceeds RequestTimeout). Waiting for the
// answer once the body is sent counts as a stall too, as it does for
// the transport's ResponseHeaderTimeout.
type stallGuard struct {
	d     time.Duration
	timer *time.Timer
}

// withStallGuard returns ctx guarded for stalls of d, and its stop.
func withStallGuard(ctx context.Context, d time.Duration) (context.Context, *stallGuard, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	g := &stallGuard{d: d}
	g.timer = time.AfterFunc(d, func() { cancel(errRequestTimeout) })
	return context.WithValue(ctx, stallGuardKey{}, g), g, func() { g.timer.Stop(); cancel(nil) }
}

// touch records progress.
func (g *stallGuard) touch() { g.timer.Reset(g.d) }

// touchStallGuard records progress of the request ctx belongs to, if it
// is guarded.
func touchStallGuard(ctx context.Context) {
	if g, ok := ctx.Value(stallGuardKey{}).(*stallGuard); ok {
		g.touch()
	}
}

// guardedBody is an upload body whose reads are progress.
type guardedBody struct {
	io.ReadSeeker
	g *stallGuard
}

func (b guardedBody) Read(p []byte) (int, error) {
	n, err := b.ReadSeeker.Read(p)
	if n > 0 {
		b.g.touch()
	}
	return n, err
}

// Put implements ObjectStore.
func (s *S3Store) Put(ctx context.Context, key string, r io.Reader, size int64, cond PutCondition) (ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	if size < 0 {
		return ObjectInfo{}, fmt.Errorf("tiering: put %s: negative size %d", key, size)
	}
	src, err := newPartSource(r, size)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("tiering: put %s: %w", key, err)
	}
	if size <= s.cfg.PartSize {
		return s.putSingle(ctx, key, src, size, cond)
	}
	return s.putMultipart(ctx, key, src, size, cond)
}

func (s *S3Store) putSingle(ctx context.Context, key string, src *partSource, size int64, cond PutCondition) (ObjectInfo, error) {
	body, err := src.part(0, size)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("tiering: put %s: %w", key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.putTimeout(size))
	defer cancel()
	ctx, guard, stop := withStallGuard(ctx, s.cfg.RequestTimeout)
	defer stop()
	in := &s3.PutObjectInput{
		Bucket:        aws.String(s.cfg.Bucket),
		Key:           aws.String(s.fullKey(key)),
		Body:          guardedBody{body, guard},
		ContentLength: aws.Int64(size),
	}
	if cond.IfNoneMatch {
		in.IfNoneMatch = aws.String("*")
	}
	if cond.IfMatch != "" {
		in.IfMatch = aws.String(cond.IfMatch)
	}
	out, err := s.client.PutObject(ctx, in)
	if err != nil {
		return ObjectInfo{}, s.mapPutErr(ctx, key, cond, err)
	}
	return ObjectInfo{Key: key, Size: size, ETag: aws.ToString(out.ETag), ModTime: time.Now()}, nil
}

func (s *S3Store) putMultipart(ctx context.Context, key string, src *partSource, size int64, cond PutCondition) (ObjectInfo, error) {
	partSize := max(s.cfg.PartSize, (size+maxS3Parts-1)/maxS3Parts)
	nparts := int((size + partSize - 1) / partSize)
	full := s.fullKey(key)

	cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	created, err := s.client.CreateMultipartUpload(cctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(s.cfg.Bucket), Key: aws.String(full),
	})
	cancel()
	if err != nil {
		return ObjectInfo{}, s.mapErr(ctx, "put", key, err)
	}
	uploadID := created.UploadId
	abort := func(cause error) error {
		// Abort on a fresh context: ctx may be what failed.
		actx, acancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		defer acancel()
		if _, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(s.cfg.Bucket), Key: aws.String(full), UploadId: uploadID,
		}); aerr != nil {
			// The bucket's lifecycle rules or a later sweep reclaim it.
			return errors.Join(cause, fmt.Errorf("tiering: abort multipart upload of %s: %w", key, aerr))
		}
		return cause
	}

	parts := make([]types.CompletedPart, nparts)
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	sem := make(chan struct{}, s.cfg.Concurrency)
	for i := range nparts {
		off := int64(i) * partSize
		n := min(partSize, size-off)
		select {
		case sem <- struct{}{}:
		case <-pctx.Done():
		}
		if pctx.Err() != nil {
			break
		}
		body, err := src.part(off, n)
		if err != nil {
			errOnce.Do(func() { firstErr = fmt.Errorf("tiering: put %s: %w", key, err); pcancel() })
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			uctx, ucancel := context.WithTimeout(pctx, s.putTimeout(n))
			defer ucancel()
			uctx, guard, stop := withStallGuard(uctx, s.cfg.RequestTimeout)
			defer stop()
			out, err := s.client.UploadPart(uctx, &s3.UploadPartInput{
				Bucket: aws.String(s.cfg.Bucket), Key: aws.String(full), UploadId: uploadID,
				PartNumber: aws.Int32(int32(i + 1)), Body: guardedBody{body, guard}, ContentLength: aws.Int64(n),
			})
			if err != nil {
				errOnce.Do(func() { firstErr = s.mapErr(uctx, "put", key, err); pcancel() })
				return
			}
			parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))}
		})
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = fmt.Errorf("tiering: put %s: %w", key, ctx.Err())
	}
	if firstErr != nil {
		return ObjectInfo{}, abort(firstErr)
	}

	in := &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(s.cfg.Bucket), Key: aws.String(full), UploadId: uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	if cond.IfNoneMatch {
		in.IfNoneMatch = aws.String("*")
	}
	if cond.IfMatch != "" {
		in.IfMatch = aws.String(cond.IfMatch)
	}
	cctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout+time.Duration(nparts)*time.Second)
	defer cancel()
	out, err := s.client.CompleteMultipartUpload(cctx, in)
	if err != nil {
		return ObjectInfo{}, abort(s.mapPutErr(cctx, key, cond, err))
	}
	return ObjectInfo{Key: key, Size: size, ETag: aws.ToString(out.ETag), ModTime: time.Now()}, nil
}

// partSource hands out seekable bodies for the parts of an upload, as the
// SDK needs to sign and retry them: sections of the source when it can
// read at offsets (files, byte readers), else buffers read in order.
type partSource struct {
	ra   io.ReaderAt // nil: read r sequentially
	base int64
	r    io.Reader
	read int64 // bytes of r consumed, when ra is nil
}

func newPartSource(r io.Reader, size int64) (*partSource, error) {
	ra, okRA := r.(io.ReaderAt)
	sk, okSk := r.(io.Seeker)
	if okRA && okSk {
		base, err := sk.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, err
		}
		return &partSource{ra: ra, base: base}, nil
	}
	return &partSource{r: io.LimitReader(r, size)}, nil
}

// part returns bytes [off, off+n) of the body. Without random access the
// parts must be asked for in order.
func (p *partSource) part(off, n int64) (io.ReadSeeker, error) {
	if p.ra != nil {
		return io.NewSectionReader(p.ra, p.base+off, n), nil
	}
	if off != p.read {
		return nil, fmt.Errorf("part at %d asked for after %d bytes", off, p.read)
	}
	buf := make([]byte, n)
	if k, err := io.ReadFull(p.r, buf); err != nil {
		return nil, fmt.Errorf("%w: body ends after %d bytes", io.ErrUnexpectedEOF, off+int64(k))
	}
	p.read += n
	return bytes.NewReader(buf), nil
}

// Get implements ObjectStore. RequestTimeout bounds the wait for the
// response to start; the body then streams under ctx, and a connection
// stalled for RequestTimeout fails the read with ErrUnavailable.
//
// Every GET asks for a range (bytes=off- for the rest of the object), so
// that the answer says which bytes it holds: an answer for another range
// than the one asked, a Content-Length that disagrees with its
// Content-Range, or a body that ends before its length fails with
// ErrUnavailable (code "truncated"), never as fewer bytes and a clean
// end.
func (s *S3Store) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if off < 0 || length < -1 {
		return nil, fmt.Errorf("tiering: get %s: invalid range %d+%d", key, off, length)
	}
	if length == 0 {
		if _, err := s.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	rng := fmt.Sprintf("bytes=%d-", off)
	if length > 0 {
		rng += fmt.Sprint(off + length - 1)
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.fullKey(key)), Range: aws.String(rng)}
	gctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(s.cfg.RequestTimeout, func() { cancel(errRequestTimeout) })
	out, err := s.client.GetObject(gctx, in)
	stopped := timer.Stop()
	if err != nil {
		defer cancel(nil)
		if isInvalidRange(err) {
			return io.NopCloser(bytes.NewReader(nil)), nil // off is at or past the end (or the object is empty)
		}
		return nil, s.mapErr(gctx, "get", key, err)
	}
	if !stopped {
		cancel(nil)
		_ = out.Body.Close() // the answer came too late to be used
		s.errs.add("get", "timeout")
		return nil, &StoreError{Op: "get", Code: "timeout", Err: fmt.Errorf("%w: get %s: timed out", ErrUnavailable, key)}
	}
	want, err := answeredLength(out, off, length)
	if err != nil {
		cancel(nil)
		_ = out.Body.Close() // the answer is not used
		s.errs.add("get", "truncated")
		return nil, &StoreError{Op: "get", Code: "truncated", Err: fmt.Errorf("%w: get %s %s: %w", ErrUnavailable, key, rng, err), body: true}
	}
	return &s3Body{body: out.Body, cancel: cancel, ctx: gctx, key: key, s: s, want: want}, nil
}

// answeredLength checks that a GET's answer holds the range asked for,
// bytes [off, off+length) (length -1: to the end), or its part up to the
// end of the object, and returns how many bytes its body must bring (-1
// when the store did not say).
func answeredLength(out *s3.GetObjectOutput, off, length int64) (int64, error) {
	n := int64(-1)
	if out.ContentLength != nil {
		n = *out.ContentLength
	}
	cr := aws.ToString(out.ContentRange)
	if cr == "" {
		// The whole object (HTTP lets a server ignore a range): usable
		// when the range starts at its beginning.
		if off != 0 {
			return 0, fmt.Errorf("%w: asked for bytes from %d, answered the whole object", errTruncatedBody, off)
		}
		if length > 0 && n > length {
			return length, nil // the body is cut to the range
		}
		return n, nil
	}
	start, end, total, ok := parseContentRange(cr)
	if !ok {
		return 0, fmt.Errorf("%w: unreadable Content-Range %q", errTruncatedBody, cr)
	}
	wantEnd := total - 1
	if length > 0 {
		wantEnd = min(off+length-1, total-1)
	}
	if start != off || end != wantEnd || (n >= 0 && n != end-start+1) {
		return 0, fmt.Errorf("%w: answered %q with %d bytes for bytes %d-%d", errTruncatedBody, cr, n, off, wantEnd)
	}
	return end - start + 1, nil
}

// parseContentRange reads "bytes start-end/total".
func parseContentRange(cr string) (start, end, total int64, ok bool) {
	rest, found := strings.CutPrefix(cr, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	span, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	s, e, found := strings.Cut(span, "-")
	if !found {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	start, err1 = strconv.ParseInt(s, 10, 64)
	end, err2 = strconv.ParseInt(e, 10, 64)
	total, err3 = strconv.ParseInt(tot, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || start < 0 || end < start || total <= end {
		return 0, 0, 0, false
	}
	return start, end, total, true
}

// s3Body is a GetObject body that brings exactly the bytes its answer
// promised, maps read errors, counts them, and releases its context on
// Close.
type s3Body struct {
	body   io.ReadCloser
	cancel context.CancelCauseFunc
	ctx    context.Context
	key    string
	s      *S3Store
	want   int64 // bytes the body must bring, -1 if unknown
	got    int64
}

func (b *s3Body) Read(p []byte) (int, error) {
	if b.want >= 0 {
		if b.got >= b.want {
			return 0, io.EOF
		}
		if rest := b.want - b.got; int64(len(p)) > rest {
			p = p[:rest]
		}
	}
	n, err := b.body.Read(p)
	b.got += int64(n)
	switch {
	case err == nil:
		return n, nil
	case err == io.EOF:
		if b.want >= 0 && b.got < b.want {
			return n, b.fail(fmt.Errorf("%w: body ended after %d of %d bytes", errTruncatedBody, b.got, b.want))
		}
		return n, io.EOF
	}
	if cerr := b.ctx.Err(); cerr != nil {
		if cerr == context.DeadlineExceeded {
			b.s.errs.add("get", "timeout")
		}
		return n, cerr // the caller's context ended the read
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("%w: %w", errTruncatedBody, err) // shorter than Content-Length
	}
	return n, b.fail(err)
}

// fail counts a failed read and maps its error.
func (b *s3Body) fail(err error) error {
	code := failureCode(b.ctx, err)
	b.s.errs.add("get", code)
	return &StoreError{Op: "get", Code: code, Err: fmt.Errorf("%w: read %s: %w", ErrUnavailable, b.key, err), body: true}
}

func (b *s3Body) Close() error {
	err := b.body.Close()
	b.cancel(nil)
	return err
}

// getWithInfo reads a whole object with the ETag of the version read.
func (s *S3Store) getWithInfo(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return nil, ObjectInfo{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.fullKey(key))})
	if err != nil {
		return nil, ObjectInfo{}, s.mapErr(ctx, "get", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err == nil && out.ContentLength != nil && int64(len(b)) != *out.ContentLength {
		err = fmt.Errorf("%w: %d of %d bytes", errTruncatedBody, len(b), *out.ContentLength)
	}
	if err != nil {
		s.errs.observe(ctx, "get", err)
		return nil, ObjectInfo{}, s.mapErr(ctx, "get", key, err)
	}
	return b, ObjectInfo{Key: key, Size: int64(len(b)), ETag: aws.ToString(out.ETag), ModTime: aws.ToTime(out.LastModified)}, nil
}

// Stat implements ObjectStore.
func (s *S3Store) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.fullKey(key))})
	if err != nil {
		return ObjectInfo{}, s.mapErr(ctx, "head", key, err)
	}
	return ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), ModTime: aws.ToTime(out.LastModified)}, nil
}

// List implements ObjectStore.
func (s *S3Store) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	full := s.fullKey(prefix)
	strip := len(s.fullKey(""))
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(full),
	})
	var out []ObjectInfo
	for p.HasMorePages() {
		pctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		page, err := p.NextPage(pctx)
		if err != nil {
			err = s.mapErr(pctx, "list", prefix, err)
			cancel()
			return nil, err
		}
		cancel()
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if len(k) < strip {
				continue
			}
			out = append(out, ObjectInfo{Key: k[strip:], Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), ModTime: aws.ToTime(o.LastModified)})
		}
	}
	return out, nil
}

// Delete implements ObjectStore.
func (s *S3Store) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.fullKey(key))})
	if err != nil {
		err = s.mapErr(ctx, "delete", key, err)
		if IsNotFound(err) {
			return nil
		}
		return err
	}
	return nil
}
