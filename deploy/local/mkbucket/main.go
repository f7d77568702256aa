// Command mkbucket waits until a MinIO (or any S3) endpoint is ready and
// creates a bucket if it does not exist yet. deploy/local/up.sh runs it
// after starting MinIO for the local cluster.
//
//	mkbucket -endpoint http://127.0.0.1:9000 -bucket strata -timeout 60s
//
// Credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Exit
// status 0 when the bucket exists at the end, 1 otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:9000", "S3 endpoint URL")
	bucket := flag.String("bucket", "strata", "bucket to create")
	region := flag.String("region", "us-east-1", "region of the bucket")
	timeout := flag.Duration("timeout", 60*time.Second, "how long to wait for the endpoint to be ready")
	flag.Parse()
	if err := run(*endpoint, *bucket, *region, *timeout); err != nil {
		fmt.Fprintf(os.Stderr, "mkbucket: %v\n", err)
		os.Exit(1)
	}
}

func run(endpoint, bucket, region string, timeout time.Duration) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return fmt.Errorf("bad endpoint %q: want a URL such as http://127.0.0.1:9000", endpoint)
	}
	ak, sk := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if ak == "" || sk == "" {
		return errors.New("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	// MinIO answers /minio/health/ready with 200 once it serves requests.
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := hc.Get(u.Scheme + "://" + u.Host + "/minio/health/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %v (last: %v)", endpoint, timeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}

	client, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(ak, sk, ""),
		Secure: u.Scheme == "https",
		Region: region,
	})
	if err != nil {
		return err
	}
	for {
		exists, err := client.BucketExists(ctx, bucket)
		if err == nil && exists {
			fmt.Printf("bucket %s exists\n", bucket)
			return nil
		}
		if err == nil {
			err = client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: region})
			if err == nil {
				fmt.Printf("bucket %s created\n", bucket)
				return nil
			}
			var resp minio.ErrorResponse
			if errors.As(err, &resp) && (resp.Code == "BucketAlreadyOwnedByYou" || resp.Code == "BucketAlreadyExists") {
				fmt.Printf("bucket %s exists\n", bucket)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bucket %s on %s: %v", bucket, endpoint, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
