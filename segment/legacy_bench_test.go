package segment

import (
	"strconv"
	"testing"
)

// BenchmarkDownConvert converts one batch of 1000 records of 1000 bytes
// (pseudo-random letters) to magic 1, per codec; MB/s counts the record
// values. The broker's figures are BenchmarkFetchDownConvert's.
//
//	go test ./segment -run '^$' -bench 'BenchmarkDownConvert$'
func BenchmarkDownConvert(b *testing.B) {
	for _, codec := range legacyCodecs {
		spec := BatchSpec{Codec: codec}
		x := uint64(1)
		for i := 0; i < 1000; i++ {
			v := make([]byte, 1000)
			for j := range v {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				v[j] = 'a' + byte(x%26)
			}
			spec.Records = append(spec.Records, Record{Timestamp: int64(i), Key: []byte("key" + strconv.Itoa(i)), Value: v})
		}
		batch := mustBatch(b, spec)
		for _, magic := range []int8{0, 1} {
			b.Run(codec.String()+"/magic"+strconv.Itoa(int(magic)), func(b *testing.B) {
				b.SetBytes(1000 * 1000)
				for i := 0; i < b.N; i++ {
					dc, err := DownConvert(batch, DownConvertOptions{Magic: magic, Limit: 2 << 20, MaxDecompressed: DefaultMaxDecompressed})
					if err != nil || dc.Records != 1000 {
						b.Fatalf("%d records, %v", dc.Records, err)
					}
				}
			})
		}
	}
}

// BenchmarkConvertLegacy parses and up-converts a produced set of 1000
// messages of 1000 bytes, per codec.
func BenchmarkConvertLegacy(b *testing.B) {
	for _, codec := range legacyCodecs {
		recs := make([]Record, 1000)
		for i := range recs {
			recs[i] = Record{Timestamp: int64(i), Value: []byte(strconv.Itoa(i) + string(make([]byte, 990)))}
		}
		dc, err := DownConvert(mustBatch(b, BatchSpec{Codec: codec, Records: recs}), DownConvertOptions{Magic: 1, Limit: 2 << 20, MaxDecompressed: DefaultMaxDecompressed})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(codec.String(), func(b *testing.B) {
			b.SetBytes(1000 * 1000)
			for i := 0; i < b.N; i++ {
				set, err := ParseLegacy(dc.Set, DefaultMaxDecompressed)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := ConvertLegacy(set, set.Codec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
