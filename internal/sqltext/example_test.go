package sqltext_test

import (
	"fmt"

	"github.com/gapscope/gapscope/internal/sqltext"
)

func ExampleNormalizer_Normalize() {
	n := sqltext.NewNormalizer(0)
	for _, raw := range []string{
		"SELECT * FROM `orders` WHERE id IN (1, 2, 3) AND note = 'it''s' -- web",
		"select * from orders where id in (7) and note=\"x\"",
		"INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y') ON DUPLICATE KEY UPDATE b = VALUES(b)",
		"/*!40101 SET NAMES utf8mb4 */",
	} {
		text, digest := n.Normalize([]byte(raw))
		fmt.Println(digest, text)
	}
	// Output:
	// 9ff4215491737c01 select * from orders where id in (...) and note = ?
	// 9ff4215491737c01 select * from orders where id in (...) and note = ?
	// c570f7fde355c801 insert into t(a, b) values (...) on duplicate key update b = values(b)
	// 6248af96f4798e7f set names utf8mb4
}
