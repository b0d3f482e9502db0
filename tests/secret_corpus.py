"""The secret shapes olav must never write to disk in clear: ``(id, text as it appears in a
tool call or a message, needles that must not remain, None or the reason it leaks today)``.
Shared by the reliability suite (tests/reliability/test_secrets.py) and the dataset export's
tests (tests/test_log_export.py)."""

from __future__ import annotations

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAPemBodyLineOne0123\n"
    "PemBodyLineTwo4567abcdef\n-----END RSA PRIVATE KEY-----"
)
OPENSSH = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEOpenSshBody99\n"
    "-----END OPENSSH PRIVATE KEY-----"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

# (id, text, needles, None or the reason it leaks today)
CORPUS: list[tuple[str, str, list[str], str | None]] = [
    ("password_eq", "login with password=Hunter2Secret!", ["Hunter2Secret"], None),
    ("passwd_colon", "passwd: Tr0ub4dorXyz", ["Tr0ub4dorXyz"], None),
    ("db_password", "DB_PASSWORD=PgPassw0rd77", ["PgPassw0rd77"], None),
    ("api_key", "api_key=AbCdEf123456ghijKL", ["AbCdEf123456ghijKL"], None),
    ("apikey_header", "apikey: ApiKeyValue8899", ["ApiKeyValue8899"], None),
    ("token_eq", "token=TokValue0987zyx", ["TokValue0987zyx"], None),
    ("access_token", "access_token=AccTok55667788", ["AccTok55667788"], None),
    ("client_secret", "client_secret: CliSecret4433", ["CliSecret4433"], None),
    ("bearer", "Authorization: Bearer BearerTok0123456789abc", ["BearerTok0123456789abc"], None),
    ("aws_access_key", "aws key AKIAIOSFODNN7EXAMPLE in use", ["AKIAIOSFODNN7EXAMPLE"], None),
    (
        "aws_secret_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
        None,
    ),
    ("pem_rsa", f"key file:\n{PEM}\n", ["PemBodyLineOne0123", "PemBodyLineTwo4567"], None),
    ("pem_openssh", f"id_ed25519:\n{OPENSSH}\n", ["OpenSshBody99"], None),
    ("jwt", f"session {JWT}", ["SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"], None),
    ("url_creds", "clone https://alice:UrlPassw0rd@git.example.com/r.git", ["UrlPassw0rd"], None),
    ("dsn_creds", "postgres://app:DsnPassw0rd@db:5432/prod", ["DsnPassw0rd"], None),
    ("github_token", "push with ghp_GhTok0123456789abcdefghijklmnopq", ["GhTok0123456789"], None),
    ("slack_token", "notify xoxb-123456789012-SlackTok4455667788", ["SlackTok4455667788"], None),
    ("stripe_key", "charge sk_live_StripeKey0123456789abcd", ["StripeKey0123456789"], None),
    ("ado_password", "Server=db;Password=AdoPwd4455;Database=x", ["AdoPwd4455"], None),
    (
        "quoted_phrase",
        'password: "Correct Horse Battery"',
        ["Horse Battery"],
        None,
    ),
    (
        "basic_auth",
        "Authorization: Basic dXNlcjpCYXNpY1Bhc3M5OQ==",
        ["dXNlcjpCYXNpY1Bhc3M5OQ=="],
        None,
    ),
    (
        "json_password",
        'result {"user": "bob", "password": "JsonPassw0rd9"}',
        ["JsonPassw0rd9"],
        None,
    ),
    ("pwd", "pwd=PwdValue6655", ["PwdValue6655"], None),
    (
        "cli_flag",
        "mysql -u root --password FlagPass8899",
        ["FlagPass8899"],
        None,
    ),
    (
        "cisco_password",
        "username admin privilege 15 password 0 CiscoPass123",
        ["CiscoPass123"],
        None,
    ),
    (
        "cisco_secret",
        "enable secret 5 $1$mERr$hx5rVt7rPNoS4wqbXKX7m0",
        ["hx5rVt7rPNoS4wqbXKX7m0"],
        None,
    ),
    (
        "snmp_community",
        "snmp-server community SnmpComm4242 RO",
        ["SnmpComm4242"],
        None,
    ),
    (
        "snmp_community_kv",
        "community: PrivComm4343",
        ["PrivComm4343"],
        None,
    ),
    (
        "snmpwalk",
        "snmpwalk -v2c -c WalkComm7777 10.0.0.1 ifDescr",
        ["WalkComm7777"],
        None,
    ),
    (
        "psk",
        "psk=WifiPsk98765",
        ["WifiPsk98765"],
        None,
    ),
    (
        "pre_shared_key",
        'set security ike policy p1 pre-shared-key ascii-text "JunPsk2024x"',
        ["JunPsk2024x"],
        None,
    ),
    (
        "wpa_passphrase",
        "wpa_passphrase=PassPhrase2024",
        ["PassPhrase2024"],
        None,
    ),
    (
        "x_api_key",
        "x-api-key: XApiKey556677",
        ["XApiKey556677"],
        None,
    ),
    (
        "azure_account_key",
        "DefaultEndpointsProtocol=https;AccountName=acc;AccountKey=AzKey0123456789abcdef==;",
        ["AzKey0123456789abcdef"],
        None,
    ),
    (
        "redis_empty_user",
        "redis://:RedisPassw0rd@cache:6379/0",
        ["RedisPassw0rd"],
        None,
    ),
    (
        "curl_user",
        "curl -u bob:CurlPass321 https://api.example.com",
        ["CurlPass321"],
        None,
    ),
    (
        "google_api_key",
        "maps key AIzaSyD-GoogleKey0123456789abcdefghijk",
        ["AIzaSyD-GoogleKey0123456789abcdefghijk"],
        None,
    ),
    ("zh_mima", "设备密码=Abc12345Zh", ["Abc12345Zh"], None),
    (
        "zh_kouling",
        "登录口令: Kouling998",
        ["Kouling998"],
        None,
    ),
    ("zh_miyao", "接口密钥：MiYao77665", ["MiYao77665"], None),
]
assert len(CORPUS) >= 30
for _id, _text, _needles, _ in CORPUS:  # a needle must not occur in any other entry
    assert all(n not in t for n in _needles for i, t, _, _ in CORPUS if i != _id), _id
