package s3fault

import (
	"net/http"
	"net/url"
	"strings"
)

// Op is an S3 operation, as the proxy tells it from a request's method,
// path and query (path-style addressing: /<bucket>/<key>).
type Op string

// The operations the proxy tells apart.
const (
	OpPutObject      Op = "put"                // PUT /b/k: PutObject
	OpUploadPart     Op = "upload-part"        // PUT /b/k?partNumber=N&uploadId=U
	OpCreateUpload   Op = "create-multipart"   // POST /b/k?uploads
	OpCompleteUpload Op = "complete-multipart" // POST /b/k?uploadId=U
	OpAbortUpload    Op = "abort-multipart"    // DELETE /b/k?uploadId=U
	OpGetObject      Op = "get"                // GET /b/k (ranged or whole)
	OpHeadObject     Op = "head"               // HEAD /b/k
	OpList           Op = "list"               // GET /b?list-type=2 (or a v1 listing, or ?uploads)
	OpDeleteObject   Op = "delete"             // DELETE /b/k
	OpDeleteObjects  Op = "delete-multi"       // POST /b?delete
	OpOther          Op = "other"              // anything else (bucket location, HEAD of the bucket, ...)
)

// Ops is every operation, in a fixed order.
var Ops = []Op{OpPutObject, OpUploadPart, OpCreateUpload, OpCompleteUpload, OpAbortUpload,
	OpGetObject, OpHeadObject, OpList, OpDeleteObject, OpDeleteObjects, OpOther}

// Request is what the proxy knows of a request once classified.
type Request struct {
	Op     Op
	Bucket string
	Key    string // "" for a bucket-level request
	Ranged bool   // a GET with a Range header
}

// Classify tells the operation of a path-style S3 request as S3 does:
// the method, whether the path names a key, and the subresources in the
// query (uploadId, partNumber, uploads, list-type, delete).
func Classify(r *http.Request) Request {
	bucket, key := splitPath(r.URL.EscapedPath())
	q := r.URL.Query()
	has := func(k string) bool { _, ok := q[k]; return ok }
	req := Request{Bucket: bucket, Key: key, Op: OpOther}
	switch r.Method {
	case http.MethodPut:
		switch {
		case key == "":
		case has("uploadId") && has("partNumber"):
			req.Op = OpUploadPart
		case len(q) == 0 || onlyIgnorable(q):
			req.Op = OpPutObject
		}
	case http.MethodPost:
		switch {
		case key == "" && has("delete"):
			req.Op = OpDeleteObjects
		case key == "":
		case has("uploads"):
			req.Op = OpCreateUpload
		case has("uploadId"):
			req.Op = OpCompleteUpload
		}
	case http.MethodDelete:
		switch {
		case key == "":
		case has("uploadId"):
			req.Op = OpAbortUpload
		case len(q) == 0 || onlyIgnorable(q):
			req.Op = OpDeleteObject
		}
	case http.MethodGet:
		switch {
		case key == "" && (has("list-type") || has("uploads") || len(q) == 0 || onlyListParams(q)):
			req.Op = OpList
		case key == "":
		case len(q) == 0 || onlyIgnorable(q) || has("partNumber"):
			req.Op = OpGetObject
			req.Ranged = r.Header.Get("Range") != ""
		}
	case http.MethodHead:
		if key != "" {
			req.Op = OpHeadObject
		}
	}
	return req
}

// splitPath returns the bucket and the (unescaped) key of a path-style
// request path.
func splitPath(escaped string) (bucket, key string) {
	p := strings.TrimPrefix(escaped, "/")
	bucket, key, _ = strings.Cut(p, "/")
	if b, err := url.PathUnescape(bucket); err == nil {
		bucket = b
	}
	if k, err := url.PathUnescape(key); err == nil {
		key = k
	}
	return bucket, key
}

// onlyIgnorable reports whether the query holds only parameters that do
// not change the operation (the SDK's x-id marker, versionId, response
// header overrides).
func onlyIgnorable(q url.Values) bool {
	for k := range q {
		if k != "x-id" && k != "versionId" && !strings.HasPrefix(k, "response-") {
			return false
		}
	}
	return true
}

// onlyListParams reports whether a bucket GET's query holds only the
// parameters of a v1 listing.
func onlyListParams(q url.Values) bool {
	for k := range q {
		switch k {
		case "prefix", "delimiter", "marker", "max-keys", "encoding-type", "x-id":
		default:
			return false
		}
	}
	return true
}
