# gapscope lab field: Perl DBD::mysql (libdbd-mysql-perl) with server-side
# prepared statements (mysql_server_prepare=1): one prepare, three executes
# of SELECT SLEEP(?), each printed as a JSON line as field_clients.py does.
# Usage: perl field_prepare.pl HOST PORT USER PASSWORD
use strict;
use warnings;
use DBI;
use Time::HiRes qw(time);

my ($host, $port, $user, $password) = @ARGV;
my $dbh = DBI->connect("DBI:mysql:database=field;host=$host;port=$port;mysql_server_prepare=1",
    $user, $password, {RaiseError => 1, PrintError => 0, AutoCommit => 1})
  or die "connect: $DBI::errstr";
my $id = $dbh->{mysql_thread_id};
my $sth = $dbh->prepare("SELECT SLEEP(?)");
for my $i (1 .. 3) {
    my $start = time();
    $sth->execute(0.1);
    $sth->fetchall_arrayref();
    my $end = time();
    printf "{\"cond\":\"prepared\",\"client\":\"DBD::mysql\",\"conn_id\":%d,\"cmd\":\"COM_STMT_EXECUTE\",\"match\":\"\",\"start_us\":%d,\"end_us\":%d,\"client_us\":%d,\"error\":0}\n",
      $id, int($start * 1e6), int($end * 1e6), int(($end - $start) * 1e6);
}
$sth->finish();
$dbh->disconnect();
