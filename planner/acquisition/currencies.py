"""ISO 4217 currency codes: the full active list for validation, common ones for forms."""

from __future__ import annotations

_ACTIVE_CODES = """
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN
    BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD
    FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY
    KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP
    MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR
    RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT
    TND TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR
    ZMW ZWG
"""

ISO_4217: frozenset[str] = frozenset(_ACTIVE_CODES.split())
"""Active ISO 4217 currency codes (fund and precious-metal codes left out on purpose)."""

COMMON_CURRENCIES: tuple[str, ...] = (
    "USD", "EUR", "GBP", "JPY", "CHF", "CNY", "INR", "BRL", "CAD", "AUD", "SEK", "NOK",
    "DKK", "PLN", "MXN", "KRW", "SGD", "ZAR",
)
"""The codes a question form offers as choices; any code in ``ISO_4217`` is accepted."""
