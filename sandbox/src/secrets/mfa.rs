//! TOTP MFA methods (`identity/mfa/method/totp`, spec A §2.7, §4.5).

use super::route::Route;

pub fn routes() -> Vec<Route> {
    vec![]
}
